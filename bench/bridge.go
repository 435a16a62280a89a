package main

import (
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// namespace is the output namespace, cmd/bridge's default.
const namespace = pipeline.Namespace

// bridgeConfig is the part of cmd/bridge's configuration the scenarios vary.
type bridgeConfig struct {
	endpoints     translate.EndpointMode
	debounceAfter time.Duration
	edsDebounce   bool
}

// everyHostPolicy, when set (-policy), is every bridge's traffic policy: a
// mesh with a policy on every host.
var everyHostPolicy xds.Policies

// everyHost gives every host one DestinationRule.
type everyHost struct{ rule *networking.DestinationRule }

func (e everyHost) For(string) *networking.DestinationRule       { return e.rule }
func (e everyHost) RoutingFor(string) *networking.VirtualService { return nil }

// hostRule is -policy's DestinationRule ("*"): outlier detection, which
// with the generator's three zones per service makes every
// ClusterLoadAssignment one per client locality (gen.Localized), and a
// circuit breaker.
var hostRule = &networking.DestinationRule{Host: "*", TrafficPolicy: &networking.TrafficPolicy{
	OutlierDetection: &networking.OutlierDetection{},
	ConnectionPool: &networking.ConnectionPoolSettings{Http: &networking.ConnectionPoolSettings_HTTPSettings{
		Http2MaxRequests: 100}},
}}

// policyParams is the report's note of -policy.
func policyParams() string {
	if everyHostPolicy == nil {
		return ""
	}
	return ", a DestinationRule on every host (outlier detection, http2MaxRequests)"
}

// bridge is cmd/bridge's pipeline (package pipeline) on the generator
// registry.
type bridge struct {
	*pipeline.Pipeline
	gen *pipeline.Generator
}

// startBridge builds the pipeline for gen and starts it.
func startBridge(gen *pipeline.Generator, cfg bridgeConfig) (*bridge, error) {
	p, err := pipeline.Start(gen, pipeline.Options{
		Registry: gen.Name(), Type: "consul", HostTemplate: consul.HostTemplate, Endpoints: cfg.endpoints,
		DebounceAfter: cfg.debounceAfter, EDSDebounce: cfg.edsDebounce, Policies: everyHostPolicy,
	})
	if err != nil {
		return nil, err
	}
	return &bridge{Pipeline: p, gen: gen}, nil
}

// waitServing waits until the first full push is done and the server
// listens.
func (b *bridge) waitServing(timeout time.Duration) error { return b.WaitServing(timeout) }

// address is the xDS server's address; valid once serving.
func (b *bridge) address() string { return b.XDS.Addr().String() }

// host returns the mesh host of generated service i.
func (b *bridge) host(i int) string {
	h, err := b.Translator.Host(b.gen.Service(i, 0).Service)
	if err != nil {
		panic(err) // generated names are valid
	}
	return h
}

// clusterName returns the cluster (and ClusterLoadAssignment) name of
// generated service i.
func (b *bridge) clusterName(i int) string { return gen.ClusterName(pipeline.ServicePort, b.host(i)) }

// stop cancels everything and waits for it to end.
func (b *bridge) stop() { b.Stop() }

// startServingBridge starts a workloadentry-mode bridge with debounce.after
// 100ms (EDS debounced when edsDebounce) on gen and waits until it serves:
// the setup of the churn scenarios (P2, P3). The caller stops it.
func startServingBridge(gen *pipeline.Generator, edsDebounce bool) (*bridge, error) {
	b, err := startBridge(gen, bridgeConfig{endpoints: translate.EndpointsWorkloadEntry,
		debounceAfter: 100 * time.Millisecond, edsDebounce: edsDebounce})
	if err != nil {
		return nil, err
	}
	if err := b.waitServing(2 * time.Minute); err != nil {
		b.stop()
		return nil, err
	}
	return b, nil
}
