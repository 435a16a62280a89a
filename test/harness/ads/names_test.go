package ads

import (
	"testing"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"
	mcp "istio.io/api/mcp/v1alpha1"
)

func TestNameOf(t *testing.T) {
	for want, m := range map[string]proto.Message{
		"outbound|80||a.local": &endpoint.ClusterLoadAssignment{ClusterName: "outbound|80||a.local", Endpoints: []*endpoint.LocalityLbEndpoints{{}}},
		"a.local:80":           &listener.Listener{Name: "a.local:80"},
		"mesh/a":               &mcp.Resource{Metadata: &mcp.Metadata{Name: "mesh/a", Version: "h-a"}},
		"":                     &mcp.Resource{},
	} {
		a, err := anypb.New(m)
		if err != nil {
			t.Fatal(err)
		}
		if got := nameOf(a); got != want {
			t.Errorf("nameOf(%v) = %q, want %q", m, got, want)
		}
	}
}
