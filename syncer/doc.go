// Package syncer is the sync step between the registries and the aggregate
// store: it implements registries.Sink, translates every Snapshot (package
// translate) and writes the result to a serviceentry.Store as the Creates,
// Updates and Deletes that make the store equal to the translation.
//
// It owns what the registries' outages mean for the mesh (docs/design.md §8):
// last-known-good on read errors, hold-down, the delete guard and persisted
// listings, and one ServiceEntry per host across registries
// (conflictPolicy). The numbered rules are on Syncer.
//
// Files: decide.go holds the decisions as pure functions (a host's roles,
// a merge's conflict, a snapshot's action, the delete guard's judgement of
// a listing), table-tested; sync.go applies the Sink calls; hosts.go keeps
// each host's claimants and writes what they produce (the reconciler that
// diffs against the Store); outage.go runs the hold-down and delete guard
// timers; registries.go keeps the registry set and its order; state.go
// persists listings; status.go reports.
//
// The set of registries is not fixed: the pipeline changes it while the
// Syncer runs (a configuration reload: AddRegistry, RemoveRegistry,
// SetOrder). A removed registry's objects leave the store; the hosts it
// shared with another registry are re-decided.
//
// The objects a Snapshot call writes, deletions included, carry its
// Observed (model.Meta.Observed), from which the pushes they cause start;
// each Snapshot that wrote anything is a sample of the store stage of
// meshbridge_convergence_seconds (hosts.go). Writes no snapshot caused
// (a hold-down or delete guard ending, a registry added or removed) carry
// none.
//
// Concurrency: every exported method is safe for concurrent use.
package syncer
