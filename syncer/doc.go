// Package syncer is the sync step between the registries and the aggregate
// store: it implements registries.Sink, translates every Snapshot (package
// translate) and writes the result to a serviceentry.Store as the Creates,
// Updates and Deletes that make the store equal to the translation.
//
// It owns what the registries' outages mean for the mesh (docs/design.md §8):
// last-known-good on read errors, hold-down, the delete guard and persisted
// listings (policy.go, state.go), and one ServiceEntry per host across
// registries (conflictPolicy). The numbered rules are on Syncer.
//
// The set of registries is not fixed: AddRegistry and RemoveRegistry change it
// while the Syncer runs (configuration reload). A removed registry's objects
// leave the store; the hosts it shared with another registry are re-decided.
//
// The objects a Snapshot call writes, deletions included, carry its
// Observed (model.Meta.Observed), from which the pushes they cause start;
// each Snapshot that wrote anything is a sample of the store stage of
// meshbridge_convergence_seconds (sync_apply.go). Writes no snapshot caused
// (a hold-down or delete guard ending, a registry added or removed) carry
// none.
//
// Concurrency: every exported method is safe for concurrent use.
package syncer
