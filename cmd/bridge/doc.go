// Command meshbridge bridges external service registries (Consul, file; Nacos
// and ZooKeeper later) into an Istio mesh as ServiceEntries and
// WorkloadEntries, served as xDS.
//
//	meshbridge run --config FILE
//	meshbridge translate --config FILE [-o yaml|json]
//	meshbridge status [--address URL] [-o json]
//	meshbridge version
//
// Wiring (run.go): registries → syncer.Syncer → serviceentry.Store →
// serviceentry.Controller → xds.DiscoveryServer, plus the HTTP endpoints
// (http.go). The configuration (config.go) is a contract documented in the
// README; every error names the field path. status (status.go) reads a
// running bridge's debug pages (/debug/registryz, /debug/syncz,
// /debug/kubez) and prints them as tables.
package main
