package gen

import (
	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/model"
)

// routerFilterName is the well-known name of Envoy's router filter.
const routerFilterName = "envoy.filters.http.router"

// buildListeners returns the proxyless gRPC Listeners, one per service port,
// keyed by name ("<host>:<port>"). Each holds an HttpConnectionManager as its
// api_listener that fetches the route of the same name over ADS.
//
// Listeners are built for every port, whatever its protocol: a gRPC client asks
// only for the listeners it dials, so unused ones cost nothing but memory. They
// are served to proxyless gRPC clients only; Envoy accepts an api_listener only
// from its bootstrap.
func buildListeners(services []*model.Service) map[string]*listener.Listener {
	out := make(map[string]*listener.Listener)
	for _, svc := range services {
		for _, port := range svc.Ports {
			_, faults := routeFor(svc, port.Number)
			l := buildListener(ListenerName(port.Number, svc.Hostname), faults)
			out[l.Name] = l
		}
	}
	return out
}

// buildListener returns the listener name; faults puts the fault filter
// (gRFC A33) before the router, for routes that inject faults.
func buildListener(name string, faults bool) *listener.Listener {
	manager := &hcm.HttpConnectionManager{
		StatPrefix: name,
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource:    adsConfigSource(),
			RouteConfigName: name,
		}},
		// grpc-go requires the router filter and requires it last (gRFC A39).
		HttpFilters: []*hcm.HttpFilter{{
			Name:       routerFilterName,
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: routerConfig},
		}},
	}
	if faults {
		manager.HttpFilters = append([]*hcm.HttpFilter{{
			Name:       faultFilterName,
			ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: faultConfig},
		}}, manager.HttpFilters...)
	}
	return &listener.Listener{
		Name:        name,
		ApiListener: &listener.ApiListener{ApiListener: mustAny(manager)},
	}
}

// routerConfig is shared read-only by every listener.
var routerConfig = mustAny(&router.Router{})

// mustAny packs m deterministically, so that equal messages give equal bytes
// and the resource diff in resources.go sees no false change. It panics only on
// a message that cannot be marshalled, which is a programming error.
func mustAny(m proto.Message) *anypb.Any {
	a := &anypb.Any{}
	if err := anypb.MarshalFrom(a, m, proto.MarshalOptions{Deterministic: true}); err != nil {
		panic(err)
	}
	return a
}
