package consul

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
)

func TestLabelsFrom(t *testing.T) {
	tests := map[string]struct {
		tags []string
		meta map[string]string
		want map[string]string
	}{
		"no tags and no meta give no labels": {want: nil},
		"a k=v tag is a label":               {tags: []string{"version=v1"}, want: map[string]string{"version": "v1"}},
		"a bare tag is a label with an empty value": {
			tags: []string{"primary"}, want: map[string]string{"primary": ""}},
		"only the first = splits":            {tags: []string{"expr=a=b"}, want: map[string]string{"expr": "a=b"}},
		"a tag with an empty key is dropped": {tags: []string{"=v"}, want: map[string]string{}},
		"meta becomes labels":                {meta: map[string]string{"protocol": "grpc"}, want: map[string]string{"protocol": "grpc"}},
		"meta wins over a tag with the same key": {
			tags: []string{"version=v1"}, meta: map[string]string{"version": "v2"},
			want: map[string]string{"version": "v2"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, labelsFrom(tc.tags, tc.meta)); diff != "" {
				t.Errorf("labelsFrom (-want +got):\n%s", diff)
			}
		})
	}
}

func entry(node, nodeAddr, id, addr string, port int, checks ...*api.HealthCheck) *api.ServiceEntry {
	return &api.ServiceEntry{
		Node:    &api.Node{Node: node, Address: nodeAddr, Datacenter: "dc1"},
		Service: &api.AgentService{ID: id, Service: "web", Address: addr, Port: port, Weights: api.AgentWeights{Passing: 1, Warning: 1}},
		Checks:  checks,
	}
}

func check(id, status string) *api.HealthCheck {
	return &api.HealthCheck{CheckID: id, Status: status, ServiceID: "x"}
}

func TestInstancesFromHealth(t *testing.T) {
	tests := map[string]struct {
		checks      []*api.HealthCheck
		healthyOnly bool
		wantEmitted bool
	}{
		"passing is emitted":                            {checks: []*api.HealthCheck{check("c", api.HealthPassing)}, healthyOnly: true, wantEmitted: true},
		"no checks at all counts as passing":            {healthyOnly: true, wantEmitted: true},
		"warning is dropped when healthyOnly":           {checks: []*api.HealthCheck{check("c", api.HealthWarning)}, healthyOnly: true},
		"warning is emitted when not healthyOnly":       {checks: []*api.HealthCheck{check("c", api.HealthWarning)}, wantEmitted: true},
		"critical is never emitted":                     {checks: []*api.HealthCheck{check("c", api.HealthCritical)}},
		"one critical among passing checks is critical": {checks: []*api.HealthCheck{check("a", api.HealthPassing), check("b", api.HealthCritical)}},
		"a critical node check drops the instance":      {checks: []*api.HealthCheck{{CheckID: "serfHealth", Status: api.HealthCritical}, check("c", api.HealthPassing)}},
		"service maintenance counts as critical":        {checks: []*api.HealthCheck{check(api.ServiceMaintPrefix+"i1", api.HealthCritical), check("c", api.HealthPassing)}},
		"node maintenance counts as critical":           {checks: []*api.HealthCheck{{CheckID: api.NodeMaint, Status: api.HealthCritical}}},
		"an unknown status is not usable":               {checks: []*api.HealthCheck{check("c", "bogus")}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := instancesFrom([]*api.ServiceEntry{entry("n1", "10.0.0.1", "i1", "", 80, tc.checks...)}, tc.healthyOnly, "")
			if emitted := len(got) == 1; emitted != tc.wantEmitted {
				t.Errorf("emitted = %v, want %v", emitted, tc.wantEmitted)
			}
		})
	}
}

func TestInstancesFromFields(t *testing.T) {
	withMeta := entry("n2", "10.0.0.2", "i2", "192.168.1.2", 9090)
	withMeta.Service.Tags = []string{"version=v1", "primary"}
	withMeta.Service.Meta = map[string]string{"protocol": "grpc", "zone": "z1", "subzone": "s1"}
	withMeta.Service.Weights = api.AgentWeights{Passing: 5, Warning: 2}
	warning := entry("n3", "10.0.0.3", "i3", "", 80, check("c", api.HealthWarning))
	warning.Service.Weights = api.AgentWeights{Passing: 5, Warning: 2}
	warning.Node.Meta = map[string]string{"zone": "node-zone"}
	zeroWeight := entry("n1", "10.0.0.1", "i1", "", 80)
	zeroWeight.Service.Weights = api.AgentWeights{}
	proxy := entry("n4", "10.0.0.4", "i4-sidecar", "", 21000)
	proxy.Service.Kind = api.ServiceKindConnectProxy

	got := instancesFrom([]*api.ServiceEntry{withMeta, warning, zeroWeight, proxy}, false, "dc0")
	want := []registries.Instance{
		{ID: "n1/i1", Address: "10.0.0.1", Port: 80, Weight: 100, Locality: "dc1//"},
		{ID: "n2/i2", Address: "192.168.1.2", Port: 9090, Protocol: "grpc", Weight: 500, Locality: "dc1/z1/s1",
			Labels: map[string]string{"version": "v1", "primary": "", "protocol": "grpc", "zone": "z1", "subzone": "s1"}},
		{ID: "n3/i3", Address: "10.0.0.3", Port: 80, Weight: 200, Locality: "dc1/node-zone/"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("instancesFrom (-want +got):\n%s", diff)
	}
}

func TestProtocolOf(t *testing.T) {
	svc := &api.AgentService{ID: "orders-8080", Port: 8080}
	check := func(service string, def api.HealthCheckDefinition) *api.HealthCheck {
		return &api.HealthCheck{ServiceID: service, Definition: def}
	}
	typed := func(service, typ string) *api.HealthCheck { return &api.HealthCheck{ServiceID: service, Type: typ} }
	cases := map[string]struct {
		meta   map[string]string
		checks api.HealthChecks
		want   string
	}{
		"the protocol metadata wins": {meta: map[string]string{"protocol": "grpc"},
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{HTTP: "http://10.0.0.1:8080/actuator/health"})}, want: "grpc"},
		"an HTTP check on the port (Spring Cloud Consul) is http": {
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{HTTP: "http://orders-host:8080/actuator/health"})}, want: "http"},
		"an HTTP check on another port (management) says nothing": {
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{HTTP: "http://10.0.0.1:8081/actuator/health"})}, want: ""},
		"an https check says nothing": {
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{HTTP: "https://10.0.0.1:8080/health"})}, want: ""},
		"another service's check says nothing": {
			checks: api.HealthChecks{check("orders-management", api.HealthCheckDefinition{HTTP: "http://10.0.0.1:8080/health"})}, want: ""},
		"a gRPC check on the port is grpc": {
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{GRPC: "10.0.0.1:8080/orders"})}, want: "grpc"},
		"a gRPC check over TLS says nothing": {
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{GRPC: "10.0.0.1:8080", GRPCUseTLS: true})}, want: ""},
		"an HTTP check whose target Consul does not give (its health endpoint) is http": {
			checks: api.HealthChecks{typed("orders-8080", "http")}, want: "http"},
		"a gRPC check whose target Consul does not give is grpc": {
			checks: api.HealthChecks{typed("orders-8080", "grpc")}, want: "grpc"},
		"a TTL check says nothing": {
			checks: api.HealthChecks{typed("orders-8080", "ttl")}, want: ""},
		"a TCP check or a node check says nothing": {
			checks: api.HealthChecks{check("orders-8080", api.HealthCheckDefinition{TCP: "10.0.0.1:8080"}), check("", api.HealthCheckDefinition{})}, want: ""},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := *svc
			s.Meta = tc.meta
			if got := protocolOf(&s, tc.checks); got != tc.want {
				t.Errorf("protocolOf = %q, want %q", got, tc.want)
			}
		})
	}
}
