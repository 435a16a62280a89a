// Package registries defines what a registry watcher delivers: the
// registry-neutral model (Service, Instance, Snapshot) and the Registry
// interface. One sub-package per registry implements it (consul, file, nacos,
// zookeeper); dubbo holds the Dubbo model nacos and zookeeper share.
//
// Rules:
//  1. A Snapshot is authoritative for one service: its Instances replace every
//     instance delivered before for that service (docs/design.md §1).
//  2. A failed or partial read is never an empty listing: a watcher that cannot
//     read a service sends a Snapshot with Err set, and the consumer keeps the
//     last-known-good instances (docs/design.md §8); a failed listing is one
//     Snapshot with Err, no Service.Name and its Scope, ended by the scope's
//     next complete listing.
//  3. A watcher emits nothing when a listing equals the one it sent last
//     (Consul api/watch/plan.go: skip deep-equal results).
//  4. Instances carry raw registry labels; sanitizing and validation happen in
//     translate, so that a rejected instance is counted where the rule lives.
//  5. Rules 1-3, the Sink contract, and the read health are written once:
//     every watcher feeds one Session per run (session.go) its reads,
//     listings, failures and reconnections, and each reader's failed or
//     successful reads; its Reporter alone calls the Sink (reporter.go, with
//     its own rules) and its Health alone logs and counts outages
//     (health.go), the registry up only when no reader is failing.
//  6. A server that accepts requests but does not answer is down: every
//     watcher runs a Liveness probe (liveness.go), so that a hung server is
//     seen within seconds, as a killed one is, and not when a blocking
//     query's wait ends.
//
// Concurrency: a Registry calls its Sink from any goroutine, but never
// concurrently for the same service. Not here: host naming, ports, labels as
// Kubernetes sees them (package translate).
package registries
