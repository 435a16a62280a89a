package gen

import (
	"testing"

	listener "github.com/envoyproxy/go-control-plane/envoy/config/listener/v3"
	route "github.com/envoyproxy/go-control-plane/envoy/config/route/v3"
	router "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	hcm "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/model"
)

func TestBuildListeners(t *testing.T) {
	routerAny, err := anypb.New(&router.Router{})
	if err != nil {
		t.Fatal(err)
	}
	manager, err := anypb.New(&hcm.HttpConnectionManager{
		StatPrefix: "a.local:80",
		RouteSpecifier: &hcm.HttpConnectionManager_Rds{Rds: &hcm.Rds{
			ConfigSource: adsConfigSource(), RouteConfigName: "a.local:80",
		}},
		HttpFilters: []*hcm.HttpFilter{{
			Name: "envoy.filters.http.router", ConfigType: &hcm.HttpFilter_TypedConfig{TypedConfig: routerAny},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		services []*model.Service
		want     map[string]*listener.Listener
	}{
		"an api_listener per port fetching its route over ADS, router filter last": {
			services: []*model.Service{grpcService("a.local", 80)},
			want: map[string]*listener.Listener{
				"a.local:80": {Name: "a.local:80", ApiListener: &listener.ApiListener{ApiListener: manager}},
			},
		},
		"no services give no listeners": {want: map[string]*listener.Listener{}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, buildListeners(tc.services))
		})
	}
}

func TestBuildRoutes(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Ports: []model.Port{
		{Name: "tcp-80", Number: 80, Protocol: model.ProtocolTCP},
		{Name: "grpc-90", Number: 90, Protocol: model.ProtocolGRPC},
	}}
	routeTo := func(port uint32, cluster string) *route.RouteConfiguration {
		name := ListenerName(port, "a.local")
		return &route.RouteConfiguration{Name: name, VirtualHosts: []*route.VirtualHost{{
			Name:    name,
			Domains: []string{"a.local", name},
			Routes: []*route.Route{{
				Match:  &route.RouteMatch{PathSpecifier: &route.RouteMatch_Prefix{Prefix: "/"}},
				Action: &route.Route_Route{Route: &route.RouteAction{ClusterSpecifier: &route.RouteAction_Cluster{Cluster: cluster}}},
			}},
		}}}
	}
	tests := map[string]struct {
		services []*model.Service
		want     map[string]*route.RouteConfiguration
	}{
		"every port gets a route to its cluster, whatever the protocol": {
			services: []*model.Service{svc},
			want: map[string]*route.RouteConfiguration{
				"a.local:80": routeTo(80, "outbound|80||a.local"),
				"a.local:90": routeTo(90, "outbound|90||a.local"),
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertEqual(t, tc.want, buildRoutes(tc.services))
		})
	}
}
