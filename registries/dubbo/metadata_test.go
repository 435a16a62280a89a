package dubbo

import (
	"slices"
	"testing"
)

func TestMetadataMethods(t *testing.T) {
	cases := map[string]struct {
		data    string
		want    []string
		wantErr bool
	}{
		"Dubbo Java's MetadataInfo: the union of the services' methods, sorted": {
			data: `{"app":"greeter","revision":"r1","services":{"org.apache.dubbo.demo.GreetService:1.0.0:tri":` +
				`{"name":"org.apache.dubbo.demo.GreetService","version":"1.0.0","protocol":"tri","port":50051,` +
				`"params":{"methods":"Greet,Hello,greet,hello","side":"provider"}},` +
				`"org.apache.dubbo.demo.GreetService:1.0.0:dubbo":{"name":"org.apache.dubbo.demo.GreetService",` +
				`"params":{"methods":"Greet,Hello,greet,hello"}}}}`,
			want: []string{"Greet", "Hello", "greet", "hello"},
		},
		"dubbo-go's MetadataInfo": {
			data: `{"app":"greeter","revision":"r1","services":{"org.apache.dubbo.demo.GreetService::tri":` +
				`{"name":"org.apache.dubbo.demo.GreetService","params":{"methods":"Greet,greet"}},` +
				`"com.foo.Other::tri":{"name":"com.foo.Other","params":{"methods":"Ping"}}}}`,
			want: []string{"Greet", "Ping", "greet"},
		},
		"another revision is an error":    {data: `{"app":"greeter","revision":"r2","services":{}}`, wantErr: true},
		"another application is an error": {data: `{"app":"shop","revision":"r1","services":{}}`, wantErr: true},
		"no JSON is an error":             {data: `r1`, wantErr: true},
		"no service: no method":           {data: `{"app":"greeter","revision":"r1"}`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := MetadataMethods([]byte(tc.data), "greeter", "r1")
			if (err != nil) != tc.wantErr || !slices.Equal(got, tc.want) {
				t.Errorf("MetadataMethods = %v, %v; want %v (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
	if got := MetadataPaths("/dubbo", "greeter", "r1"); !slices.Equal(got, []string{"/dubbo/metadata/greeter/r1", "/dubbo/greeter/r1"}) {
		t.Errorf("MetadataPaths = %v", got)
	}
}
