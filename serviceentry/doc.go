// Package serviceentry keeps the aggregate registry — an in-memory store of
// ServiceEntries and WorkloadEntries — and decides, per change, between an
// incremental EDS push and a full push.
//
// Registry snapshots are translated and written to the Store by the sync
// step (package syncer); the Store's
// handlers, in registration order on one worker queue, drive the Controller,
// which calls an XDSUpdater (package xds/dns, which resolves endpoint names and
// hands on to package xds), and any other
// handler (the Kubernetes writer, package kube; MCP change notices).
//
// Rules:
//  1. Store: a key (kind, namespace, name) is unique; Create/Update/Delete with
//     resource versions and optimistic concurrency; handlers see state at least
//     as new as their event (Istio pilot/pkg/model/config.go ConfigStore and
//     ConfigStoreController; pilot/pkg/config/memory).
//  2. ServiceEntry events: hosts diffed by what the CDS, LDS and RDS
//     generators read (host, namespace, ports); added, updated and deleted
//     hosts make one full push; every unchanged host gets incremental EDS
//     (Istio release-1.29 serviceentry/controller.go serviceEntryHandler,
//     stricter: Istio's service equality also counts labels, selector,
//     exportTo, addresses, resolution and location, and pushes a DNS host's
//     endpoint change fully; no meshbridge Cluster, Listener or
//     RouteConfiguration shows them).
//  3. WorkloadEntry events: the services selecting the workload before or
//     after the event get their endpoints pushed as EDS, DNS services
//     included (Istio workloadEntryHandler pushes those fully).
//  4. A push an event requests starts (PushRequest.Start) at the event's
//     object's Meta.Observed, the registry observation the sync step
//     wrote it for (a deletion's comes with DeleteObserved), else at the
//     handler's clock. meshbridge_convergence_seconds is declared here
//     (convergence.go), upstream of syncer and xds, which observe it.
//
// Concurrency: Store is safe for concurrent use; handlers run on
// the Store's single queue; Controller.Services may be called from any
// goroutine. Not here: xDS encoding, debounce and endpoint shards (package
// xds), Kubernetes writes (package kube).
package serviceentry
