// Command meshbridge bridges external service registries (Consul, Nacos,
// ZooKeeper with Dubbo, a file) into an Istio mesh as ServiceEntries and
// WorkloadEntries, served as xDS, over MCP to istiod and as CRDs.
//
//	meshbridge run --config FILE
//	meshbridge translate --config FILE [-o yaml|json]
//	meshbridge status [--address URL] [-o json]
//	meshbridge version
//
// Wiring (run.go): the data path from package pipeline (registries →
// syncer.Syncer → serviceentry.Store → serviceentry.Controller →
// xds.DiscoveryServer), the Kubernetes writer (kube.go), the HTTP endpoints
// (http.go) and configuration reload (reload.go). The configuration (config.go) is a contract documented in the
// README; every error names the field path. status (status.go) reads a
// running bridge's debug pages (/debug/registryz, /debug/syncz,
// /debug/kubez) and prints them as tables.
package main
