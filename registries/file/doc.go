// Package file is a registry read from a static YAML file: the embedded
// default, demos, tests and benchmarks. The file is re-read when it changes,
// including atomic renames and Kubernetes ConfigMap symlink swaps.
//
// Schema (a contract, README "Configuration"):
//
//	services:
//	- host: web.static.local
//	  ports: [{number: 8080, protocol: grpc}]     # protocol: http | http2 | grpc | tcp
//	  instances:
//	  - {address: 10.0.0.1, port: 8080, labels: {version: v1}, weight: 1, locality: region/zone/subzone}
//
// Rules:
//  1. A file that cannot be read or parsed changes nothing: the last good
//     listing stays (docs/design.md §8) and the error is reported: one
//     registry-wide Err snapshot (empty Service.Name) per run of the same
//     failure, and registries.Health (one log line down, one up; the
//     registry is a registries.HealthReporter whose lastError clears at the
//     next good read). A path that does not exist, is a directory, may not
//     be read or is a symbolic link loop is registries.Permanent; still
//     re-read at every change and resync. A file larger than Config.MaxSize
//     (file.maxSize, DefaultMaxSize) is not read: such a failure too. A file that is not a complete document is such a failure
//     (ErrIncomplete): an empty file, or one whose services key is missing
//     or null ("services:" and nothing after it), which is what a write cut
//     short or still in progress leaves. Only an explicit `services: []`
//     lists no service.
//  2. A file that is not a registry document is refused whole, the error
//     naming the field path: YAML that does not parse, an unknown key, a
//     value of the wrong type, and (rule 1) an incomplete file or one over
//     Config.MaxSize. These are registries.Permanent: only an edit fixes
//     them. A value its field does not allow skips only its service
//     (Skipped: a port outside 1-65535, an unknown protocol, no host, a host
//     an earlier served service has), logged once and counted in
//     meshbridge_registry_skipped_total{reason="invalid"}, as other
//     registries skip what they cannot serve; an instance without a port or
//     with a weight past the common scale is passed on as
//     registries.InvalidInstance, which translate rejects (malformed).
//  3. An instance's ID is "address:port", so a WorkloadEntry keeps its name
//     while the instance stays.
//  4. Changes are detected by watching the file's directory (fsnotify): a
//     rename over the file, a ConfigMap's symlink swap, or a write in place
//     (cp, a shell redirection, an editor that truncates and rewrites); and
//     by a periodic re-read as a safety net. The file is read once it has
//     gone Config.Settle (200 ms) without a notification, so an in-place
//     writer, which notifies at every write, is read when it is done rather
//     than halfway; a resync meanwhile waits for that read. A re-read whose
//     content is unchanged emits nothing. A directory that cannot be watched
//     yet (it does not exist) is retried at each resync. A writer that
//     pauses longer than Settle halfway may still be read then: rule 1
//     refuses what is not a complete document, but a file cut between two
//     services is one, so a slow writer should write elsewhere and rename.
//  5. A reload parses only the services whose text changed, when the file
//     has the simple block layout: a "services:" line at column 0 (nothing
//     after the colon but a comment), then the list's items, each starting
//     with "- " (or a lone "-") at one indentation, every other line of an
//     item indented deeper; blank lines and full-line comments anywhere;
//     lines broken by "\n" only (no carriage return, NEL, LS or PS), and no
//     tab, '&', '*' or '!' anywhere in the file. Each item is then parsed
//     on its own, as the text before the first item followed by the item,
//     unless the last good read had an item of the same text (SHA-256)
//     after the same text before it: that item's service is reused. Any
//     other layout (a flow list, JSON, document markers, directives,
//     anchors, aliases, tags, other top-level keys) is parsed whole, and so
//     is a file with an item that does not parse on its own as one service
//     or with a duplicate host: the services and errors are always those of
//     Parse on the whole file.
//  6. What is sent follows registries.Reporter: a listing, then the services
//     that changed and the removals it brings; a failed read is one
//     registry-wide error per run of the same failure; Synced after the
//     first good read.
//
// Not here: host validation and label sanitizing (package translate).
package file
