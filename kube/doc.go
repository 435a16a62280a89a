// Package kube writes the aggregate registry's ServiceEntries and
// WorkloadEntries to Kubernetes as networking.istio.io/v1 custom resources,
// so operators can audit them with kubectl and istiod reads them with no
// extra configuration (README "Kubernetes output").
//
// A Writer registers a handler on the store (package serviceentry): desired
// state is the store's objects in output.namespace; the handler, and a watch
// on the writer's own objects, queue keys on a rate-limited client-go
// workqueue and workers converge the apiserver on the store.
//
// Files: plan.go is the decision, pure and shared with translate --diff
// (diff.go); registries.go the known registries; live.go what the writer
// knows of the apiserver; writer.go the loop, queue and retries; apply.go
// the writes; watch.go the watch; objects.go the typed clients;
// ratelimit.go the clients' rate limiter, changeable while they run.
//
// Rules:
//  1. Server-side apply, field manager "meshbridge", force: meshbridge owns
//     the labels, annotations and spec it sends (docs/design.md §6; the Kubernetes
//     server-side apply contract).
//  2. An object is written only when its meshbridge.io/content-hash differs
//     from the apiserver's copy, or someone else changed the labels,
//     annotations or spec of that copy since meshbridge wrote or listed it
//     (a resourceVersion newer than the one its own last write returned,
//     with another metadata.generation, labels or annotations). The copy is
//     known from a list at the start of leadership, then from every write's
//     response and watch event. An unchanged mesh costs zero writes, also
//     after a restart; meshbridge's own writes coming back through the watch
//     cost none, and neither does a change to .status alone (istiod's VIPs
//     in status.addresses, its WaypointBound conditions): meshbridge never
//     writes nor clears .status.
//     An object is updated in place, never deleted and recreated: istiod
//     keys a ServiceEntry's allocated VIP and its precedence among
//     ServiceEntries of one host to the object (UID, creationTimestamp).
//  3. Ownership: an object is ours only with app.kubernetes.io/managed-by=
//     meshbridge, meshbridge.io/instance equal to output.instance (absent
//     or empty when that is unset), and meshbridge.io/registry naming a
//     registry the writer knows. The known registries are the configured
//     ones at start, plus every registry added while the process runs
//     (AddRegistry); none is forgotten before the process ends, so the
//     objects of a registry removed by a reload are deleted, and those of
//     one removed between restarts are left. Others are never written nor
//     deleted, even under a name we want (meshbridge_kube_conflicts_total),
//     and a desired object that would not be ours once written is not
//     written. This is what peers get wrong: objects rewritten on every
//     sync, never deleted, or orphaned by a restart.
//  4. Drift: while leading, a metadata-only watch (client-go metadata
//     informers; labels and content hash, never specs) on the objects in
//     output.namespace that may be ours (managed-by=meshbridge and the
//     instance label, any registry) restores at once an object of ours
//     deleted or edited by hand.
//  5. Garbage collection at the start of leadership and every resync period:
//     objects of ours that the store does not hold are deleted, with a UID
//     precondition, except those of a registry that has not synced yet
//     (not known is not gone: docs/design.md §8). The same list corrects
//     drift the watch missed.
//  6. One writer: with leader election, only the holder of a
//     coordination.k8s.io Lease writes and watches (client-go
//     leaderelection); every replica serves xDS. Losing the lease stops new
//     writes at once; requests in flight finish. A graceful stop releases
//     the lease.
//  7. Errors: transport errors, 5xx, 429, 403 and 404 are retried per object
//     with exponential backoff (200 ms doubling to 30 s), and all at once as
//     soon as one retry succeeds (the apiserver is back); a 4xx the
//     apiserver would repeat (422 Invalid, 400, 413) is logged with the
//     object and not retried until the object changes or the next resync. An
//     object whose request exceeds translate.MaxObjectBytes is never sent
//     (translate already emits large inline services in WorkloadEntry form).
//  8. An apiserver outage never affects xDS: the writer is a store handler
//     that only queues keys, so its backlog is bounded by the number of
//     objects, holding keys, not copies.
//
// Concurrency: Writer and RateLimiter methods are safe for concurrent use.
// Not here: the translation and the aggregate store (packages translate,
// serviceentry), xDS and MCP serving (package xds).
package kube
