package ads

import (
	"maps"
	"slices"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
)

// follow is how a stream subscribes to one type by the resources of
// another it holds (Options.FollowCDS, FollowLDS): Envoy and gRPC follow
// each Cluster with its ClusterLoadAssignment and each Listener with its
// RouteConfiguration.
type follow struct {
	child string
	// names returns the child names one parent resource names.
	names func(*anypb.Any) []string
}

var (
	// followCDS: a cluster's ClusterLoadAssignment has the cluster's name
	// (meshbridge's clusters set no eds_cluster_config.service_name).
	followCDS = follow{child: resourcev3.EndpointType, names: func(a *anypb.Any) []string { return []string{nameOf(a)} }}
	// followLDS: a listener's RouteConfiguration is the one its
	// api_listener's HttpConnectionManager names for RDS.
	followLDS = follow{child: resourcev3.RouteType, names: routeNamesOf}
)

// routeNamesOf returns the RDS route configuration a Listener's
// api_listener names, if any.
func routeNamesOf(a *anypb.Any) []string {
	l := &listener.Listener{}
	if a.UnmarshalTo(l) != nil {
		return nil
	}
	m := &hcm.HttpConnectionManager{}
	if l.GetApiListener().GetApiListener().UnmarshalTo(m) != nil {
		return nil
	}
	if name := m.GetRds().GetRouteConfigName(); name != "" {
		return []string{name}
	}
	return nil
}

// childNames returns the child names of parents, sorted and distinct.
func (f *follow) childNames(parents []*anypb.Any) []string {
	var names []string
	for _, a := range parents {
		names = append(names, f.names(a)...)
	}
	slices.Sort(names)
	return slices.Compact(names)
}

// heldLocked returns the resources of typeURL the stream holds, by name.
func (c *client) heldLocked(typeURL string) map[string]*anypb.Any {
	if ts := c.types[typeURL]; ts != nil {
		return maps.Clone(ts.held)
	}
	return map[string]*anypb.Any{}
}
