package eureka

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
)

func TestDecodeApplications(t *testing.T) {
	cases := map[string]struct {
		body string
		want applications
	}{
		"lists, numbers, overriddenStatus": {
			body: `{"applications":{"versions__delta":"1","apps__hashcode":"DOWN_1_UP_1_","application":[
				{"name":"ORDERS","instance":[
					{"instanceId":"h1:orders:8080","app":"ORDERS","hostName":"h1","ipAddr":"10.0.0.5","status":"UP","overriddenStatus":"UNKNOWN",
					 "port":{"$":8080,"@enabled":"true"},"securePort":{"$":443,"@enabled":"false"},
					 "dataCenterInfo":{"@class":"com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo","name":"MyOwn"},
					 "metadata":{"zone":"z1","management.port":"8080"},"actionType":"ADDED"},
					{"instanceId":"h2:orders:8081","app":"ORDERS","hostName":"h2","ipAddr":"10.0.0.6","status":"DOWN","overriddenStatus":"UNKNOWN",
					 "port":{"$":8081,"@enabled":"true"},"securePort":{"$":8443,"@enabled":"true"},
					 "dataCenterInfo":{"@class":"com.netflix.appinfo.AmazonInfo","name":"Amazon","metadata":{"availability-zone":"us-east-1a"}},
					 "metadata":{"@class":"java.util.Collections$EmptyMap"},"actionType":"MODIFIED"}]}]}}`,
			want: applications{Hashcode: "DOWN_1_UP_1_", Apps: []application{{Name: "ORDERS", Instances: []instance{
				{App: "ORDERS", ID: "h1:orders:8080", HostName: "h1", IPAddr: "10.0.0.5", Status: "UP", OverriddenStatus: "UNKNOWN",
					Port: 8080, PortEnabled: true, SecurePort: 443, Metadata: map[string]string{"zone": "z1", "management.port": "8080"}, ActionType: "ADDED"},
				{App: "ORDERS", ID: "h2:orders:8081", HostName: "h2", IPAddr: "10.0.0.6", Status: "DOWN", OverriddenStatus: "UNKNOWN",
					Port: 8081, PortEnabled: true, SecurePort: 8443, SecureEnabled: true, AvailabilityZone: "us-east-1a", ActionType: "MODIFIED"},
			}}}},
		},
		"one element written alone, strings for numbers, old overriddenstatus, no instanceId": {
			body: `{"applications":{"apps__hashcode":"OUT_OF_SERVICE_1_","application":{"name":"web","instance":
				{"app":"web","hostName":"web-1.example.com","status":"up","overriddenstatus":"OUT_OF_SERVICE",
				 "port":{"$":"9000","@enabled":true},"metadata":{"n":7,"b":true}}}}}`,
			want: applications{Hashcode: "OUT_OF_SERVICE_1_", Apps: []application{{Name: "web", Instances: []instance{
				{App: "WEB", ID: "web-1.example.com", HostName: "web-1.example.com", Status: "UP", OverriddenStatus: "OUT_OF_SERVICE",
					Port: 9000, PortEnabled: true, Metadata: map[string]string{"n": "7", "b": "true"}},
			}}}},
		},
		"empty registry": {
			body: `{"applications":{"versions__delta":"1","apps__hashcode":"","application":[]}}`,
			want: applications{Apps: []application{}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := decodeApplications([]byte(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestDecodeApplicationsRefusesOtherAnswers(t *testing.T) {
	for name, body := range map[string]string{
		"html":                       `<html>login</html>`,
		"no applications":            `{"apps":[]}`,
		"a status that is an object": `{"applications":{"application":[{"name":"A","instance":[{"status":{"x":1}}]}]}}`,
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := decodeApplications([]byte(body)); err == nil {
				t.Error("decoded")
			}
		})
	}
}

func TestReconcileHashcode(t *testing.T) {
	cases := []struct {
		counts map[string]int
		want   string
	}{
		{nil, ""},
		{map[string]int{"UP": 0}, ""},
		{map[string]int{"UP": 3}, "UP_3_"},
		{map[string]int{"UP": 2, "DOWN": 1, "OUT_OF_SERVICE": 1}, "DOWN_1_OUT_OF_SERVICE_1_UP_2_"},
	}
	for _, tc := range cases {
		if got := reconcileHashcode(tc.counts); got != tc.want {
			t.Errorf("reconcileHashcode(%v) = %q, want %q", tc.counts, got, tc.want)
		}
		// The recorded server's writing of the server's rule agrees.
		if got := eurekatest.Hashcode(tc.counts); got != tc.want {
			t.Errorf("eurekatest.Hashcode(%v) = %q, want %q", tc.counts, got, tc.want)
		}
	}
}
