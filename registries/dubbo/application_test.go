package dubbo

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// curatorInstance is a ServiceInstance as Dubbo 3 writes it at
// /services/demo-provider/10.0.0.1:20880 (Curator's JsonInstanceSerializer,
// Dubbo's ZookeeperInstance payload).
const curatorInstance = `{
  "name": "demo-provider",
  "id": "10.0.0.1:20880",
  "address": "10.0.0.1",
  "port": 20880,
  "sslPort": null,
  "payload": {
    "@class": "org.apache.dubbo.registry.zookeeper.ZookeeperInstance",
    "id": "10.0.0.1:20880",
    "name": "demo-provider",
    "metadata": {
      "dubbo.endpoints": "[{\"port\":20880,\"protocol\":\"dubbo\"},{\"port\":50051,\"protocol\":\"tri\"}]",
      "dubbo.metadata.revision": "a1b2c3d4",
      "dubbo.metadata.storage-type": "local",
      "dubbo.metadata-service.url-params": "{\"port\":\"20880\",\"protocol\":\"dubbo\"}",
      "timestamp": "1700000000000"
    }
  },
  "registrationTimeUTC": 1700000000000,
  "serviceType": "DYNAMIC",
  "uriSpec": null
}`

// TestParseServiceInstance: Dubbo 3 application-level instances as
// ZooKeeper holds them (doc.go rule 7).
func TestParseServiceInstance(t *testing.T) {
	for _, tc := range []struct {
		name    string
		json    string
		want    AppInstance
		wantErr string
	}{
		{
			name: "a Curator ServiceInstance with dubbo and tri endpoints",
			json: curatorInstance,
			want: AppInstance{
				Application: "demo-provider", Address: "10.0.0.1", Port: 20880,
				Endpoints: []Endpoint{{Port: 20880, Protocol: "dubbo"}, {Port: 50051, Protocol: "tri"}},
				Revision:  "a1b2c3d4", StorageType: "local",
				Metadata: map[string]string{
					"dubbo.endpoints":                   `[{"port":20880,"protocol":"dubbo"},{"port":50051,"protocol":"tri"}]`,
					"dubbo.metadata.revision":           "a1b2c3d4",
					"dubbo.metadata.storage-type":       "local",
					"dubbo.metadata-service.url-params": `{"port":"20880","protocol":"dubbo"}`,
					"timestamp":                         "1700000000000",
				},
			},
		},
		{
			name: "no metadata: no endpoints",
			json: `{"name":"app","id":"10.0.0.2:20880","address":"10.0.0.2","port":20880,"payload":null}`,
			want: AppInstance{Application: "app", Address: "10.0.0.2", Port: 20880},
		},
		{name: "not JSON", json: `10.0.0.1:20880`, wantErr: "ServiceInstance JSON"},
		{name: "a port of the wrong type", json: `{"name":"app","address":"10.0.0.1","port":"20880"}`, wantErr: "ServiceInstance JSON"},
		{name: "no port", json: `{"name":"app","address":"10.0.0.1"}`, wantErr: "no port in 1-65535"},
		{name: "port 0", json: `{"name":"app","address":"10.0.0.1","port":0}`, wantErr: "no port in 1-65535"},
		{name: "port 70000", json: `{"name":"app","address":"10.0.0.1","port":70000}`, wantErr: "no port in 1-65535"},
		{name: "no name", json: `{"address":"10.0.0.1","port":20880}`, wantErr: "no name"},
		{name: "no address", json: `{"name":"app","port":20880}`, wantErr: "no address"},
		{
			name:    "dubbo.endpoints not JSON",
			json:    `{"name":"app","address":"10.0.0.1","port":20880,"payload":{"metadata":{"dubbo.endpoints":"dubbo:20880"}}}`,
			wantErr: "dubbo.endpoints",
		},
		{
			name:    "dubbo.endpoints with port 0",
			json:    `{"name":"app","address":"10.0.0.1","port":20880,"payload":{"metadata":{"dubbo.endpoints":"[{\"port\":0,\"protocol\":\"dubbo\"}]"}}}`,
			wantErr: "dubbo.endpoints: port 0",
		},
		{
			name:    "dubbo.endpoints with port 70000",
			json:    `{"name":"app","address":"10.0.0.1","port":20880,"payload":{"metadata":{"dubbo.endpoints":"[{\"port\":70000,\"protocol\":\"tri\"}]"}}}`,
			wantErr: "dubbo.endpoints: port 70000",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseServiceInstance([]byte(tc.json))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseServiceInstance = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseServiceInstance: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("ParseServiceInstance (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAppInstanceFromMetadata: the parts Nacos holds are checked as
// ParseServiceInstance checks them.
func TestAppInstanceFromMetadata(t *testing.T) {
	meta := map[string]string{MetaEndpoints: `[{"port":50051,"protocol":"tri"}]`, MetaRevision: "r1"}
	for _, tc := range []struct {
		name    string
		app     string
		addr    string
		port    uint32
		meta    map[string]string
		want    AppInstance
		wantErr string
	}{
		{
			name: "endpoints and revision", app: "shop", addr: "10.0.0.1", port: 8080, meta: meta,
			want: AppInstance{Application: "shop", Address: "10.0.0.1", Port: 8080,
				Endpoints: []Endpoint{{Port: 50051, Protocol: "tri"}}, Revision: "r1", Metadata: meta},
		},
		{
			name: "a weight", app: "shop", addr: "10.0.0.1", port: 8080, meta: map[string]string{"weight": "30"},
			want: AppInstance{Application: "shop", Address: "10.0.0.1", Port: 8080, Weight: 30, Metadata: map[string]string{"weight": "30"}},
		},
		{
			name: "an invalid weight is 0", app: "shop", addr: "10.0.0.1", port: 8080, meta: map[string]string{"weight": "-3"},
			want: AppInstance{Application: "shop", Address: "10.0.0.1", Port: 8080, Metadata: map[string]string{"weight": "-3"}},
		},
		{name: "no application", addr: "10.0.0.1", port: 8080, meta: meta, wantErr: "no name"},
		{name: "no address", app: "shop", port: 8080, meta: meta, wantErr: "no address"},
		{name: "port 0", app: "shop", addr: "10.0.0.1", meta: meta, wantErr: "port 0 is not in 1-65535"},
		{name: "port 70000", app: "shop", addr: "10.0.0.1", port: 70000, meta: meta, wantErr: "port 70000 is not in 1-65535"},
		{
			name: "endpoints with a negative port", app: "shop", addr: "10.0.0.1", port: 8080,
			meta: map[string]string{MetaEndpoints: `[{"port":-1,"protocol":"tri"}]`}, wantErr: "dubbo.endpoints",
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AppInstanceFromMetadata(tc.app, tc.addr, tc.port, tc.meta)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("AppInstanceFromMetadata = %+v, %v; want an error containing %q", got, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("AppInstanceFromMetadata: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("AppInstanceFromMetadata (-want +got):\n%s", diff)
			}
		})
	}
}

// TestIsApplicationInstance: dubbo.metadata.revision or dubbo.endpoints,
// even empty, marks a Dubbo 3 application-level instance.
func TestIsApplicationInstance(t *testing.T) {
	for _, tc := range []struct {
		meta map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"protocol": "dubbo", "dubbo.metadata.storage-type": "local"}, false},
		{map[string]string{MetaRevision: "r1"}, true},
		{map[string]string{MetaEndpoints: "[]"}, true},
		{map[string]string{MetaRevision: ""}, true},
	} {
		if got := IsApplicationInstance(tc.meta); got != tc.want {
			t.Errorf("IsApplicationInstance(%v) = %v, want %v", tc.meta, got, tc.want)
		}
	}
}

// TestParseMetadataInfo: an application's MetadataInfo and the union of its
// services' methods.
func TestParseMetadataInfo(t *testing.T) {
	for _, tc := range []struct {
		name        string
		json        string
		wantApp     string
		wantRev     string
		wantMethods []string
		wantErr     bool
	}{
		{
			name: "two services, overlapping methods",
			json: `{"app":"demo-provider","revision":"a1b2c3d4","services":{
				"com.foo.DemoService:dubbo":{"name":"com.foo.DemoService","protocol":"dubbo","port":20880,"path":"com.foo.DemoService",
					"params":{"methods":"sayHello,greet","side":"provider"}},
				"g1/com.foo.Other:1.0.0:tri":{"name":"com.foo.Other","group":"g1","version":"1.0.0","protocol":"tri","port":50051,
					"params":{"methods":"greet,bye"}}}}`,
			wantApp: "demo-provider", wantRev: "a1b2c3d4", wantMethods: []string{"bye", "greet", "sayHello"},
		},
		{
			name:    "a null service and one without methods",
			json:    `{"app":"a","revision":"r","services":{"x":null,"y":{"name":"y","params":{}}}}`,
			wantApp: "a", wantRev: "r",
		},
		{name: "not JSON", json: `{"app":`, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseMetadataInfo([]byte(tc.json))
			if tc.wantErr {
				if err == nil {
					t.Fatalf("ParseMetadataInfo = %+v, want an error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseMetadataInfo: %v", err)
			}
			if got.App != tc.wantApp || got.Revision != tc.wantRev {
				t.Errorf("app, revision = %q, %q; want %q, %q", got.App, got.Revision, tc.wantApp, tc.wantRev)
			}
			if diff := cmp.Diff(tc.wantMethods, got.Methods()); diff != "" {
				t.Errorf("Methods() (-want +got):\n%s", diff)
			}
		})
	}
}
