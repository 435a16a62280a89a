package dubbo

import (
	"slices"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
)

func TestReadMetadata(t *testing.T) {
	cases := map[string]struct {
		data         string
		want         []string
		wantDefaults registries.ProviderDefaults
		wantErr      bool
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
		"every service declares the same call defaults: they are the revision's": {
			data: `{"app":"greeter","revision":"r1","services":{"a::tri":{"name":"a","params":{"methods":"A",` +
				`"timeout":"200","retries":"3","loadbalance":"leastactive"}},` +
				`"b::tri":{"name":"b","params":{"methods":"B","timeout":"200","retries":"3","loadbalance":"leastactive"}}}}`,
			want:         []string{"A", "B"},
			wantDefaults: registries.ProviderDefaults{Timeout: "200", Retries: "3", LoadBalance: "leastactive"},
		},
		"services declaring different call defaults: none": {
			data: `{"app":"greeter","revision":"r1","services":{"a::tri":{"name":"a","params":{"methods":"A","timeout":"200"}},` +
				`"b::tri":{"name":"b","params":{"methods":"B","timeout":"500"}}}}`,
			want: []string{"A", "B"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := ReadMetadata([]byte(tc.data), "greeter", "r1")
			if (err != nil) != tc.wantErr || !slices.Equal(got.Methods, tc.want) || got.Defaults != tc.wantDefaults {
				t.Errorf("ReadMetadata = %+v, %v; want methods %v, defaults %+v (error %v)", got, err, tc.want, tc.wantDefaults, tc.wantErr)
			}
		})
	}
	if got := MetadataPaths("/dubbo", "greeter", "r1"); !slices.Equal(got, []string{"/dubbo/metadata/greeter/r1", "/dubbo/greeter/r1"}) {
		t.Errorf("MetadataPaths = %v", got)
	}
}
