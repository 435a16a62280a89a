// Package translate turns one registry service (registries.Service with its
// instances) into Istio networking.istio.io/v1 objects: one ServiceEntry for
// its host and, by default or when inline endpoints would not fit (rule 10),
// one WorkloadEntry per usable instance, as *model.Config ready for the
// aggregate store, the Kubernetes writer and `meshbridge translate` (ToYAML,
// ToJSON).
//
// Rules (docs/design.md §3 unless noted; README "Naming conventions" states the
// ones operators see):
//  1. One ServiceEntry per host; metadata.name = host. The host is svc.Host
//     (a registry that names its services itself: the file registry; a Dubbo
//     service, named by package registries/dubbo), or the host template
//     (consul: <service>.service.consul, or <service>.service.<dc>.consul for
//     a remote datacenter), lower-cased, "_" → "-", and a valid DNS-1123
//     subdomain / FQDN: a name that cannot make one (a Dubbo inner class's
//     "$"), or svc.HostError, fails the service.
//  2. location MESH_INTERNAL; resolution AUTO (the default: STATIC while every
//     instance of the host is an IP, DNS while one is registered by name),
//     STATIC (an instance whose address is a DNS name is rejected,
//     hostname-address) or DNS; the host's resolution is given in
//     Sticky.Resolution by the caller that sees all its services
//     (resolution.go holds the rule's table).
//  3. Ports are named <protocol>-<number> (http, http2, grpc, tcp; dubbo →
//     tcp-dubbo-<n> with protocol TCP; unknown → tcp). The port is servicePort,
//     else the declared ports, else the port kept in Sticky, else the lowest
//     instance port; once chosen the number is kept, so that in workloadentry
//     mode the ServiceEntry's spec and labels stay byte-identical while only
//     instances change (the incremental EDS path of Istio's
//     serviceEntryHandler). The protocol follows the instances: the declared
//     one, else that of an instance on the port declaring one (the first by
//     ID), else that of any instance declaring one (the lowest port), else
//     tcp; with no instance left, the one last chosen. A bridge running since
//     before an instance changed its protocol thus serves what a bridge
//     started after it serves. Instances on another port map through the
//     WorkloadEntry (or endpoint) ports map. A service with
//     svc.PortPerProtocol (a Dubbo service) gets one port per protocol its
//     instances serve (tri → grpc-<n>), each kept the same way, and each
//     instance maps every port to its own port of that protocol
//     (registries.InstanceExtra.Ports).
//  4. WorkloadEntry name = <host>-<10 hex of sha256(registry/instance ID)>; its
//     spec labels are the sanitized instance labels plus meshbridge.io/service,
//     which the ServiceEntry's workloadSelector matches (ServiceLabelValue).
//  5. Every object carries app.kubernetes.io/managed-by=meshbridge,
//     meshbridge.io/registry=<name>, meshbridge.io/instance and istio.io/rev
//     when configured, and the annotation meshbridge.io/content-hash = ContentHash(labels,
//     annotations, spec), over meshbridge's own annotations: a ServiceEntry
//     whose admitted instances declare methods (registries.InstanceExtra;
//     a Dubbo service's) carries meshbridge.io/dubbo-methods, their sorted
//     union, at most MaxDubboMethodsBytes; one whose admitted instances
//     declare call defaults (Dubbo's timeout, retries, loadbalance)
//     carries meshbridge.io/dubbo-defaults, the value most of them declare
//     for each (model.RouteDefaults).
//  6. Registry labels become Kubernetes labels, sanitized or dropped by the
//     rules of "Registry labels" below; every label not carried exactly as
//     written is reported in Result.LabelChanges with a reason.
//  7. Everything emitted passes ValidateServiceEntry / ValidateWorkloadEntry,
//     which mirror istio pkg/config/validation (validation.go
//     ValidateServiceEntry, validateWorkloadEntry) and the CRD schema limits.
//     An invalid instance is skipped with a Rejection, never the service;
//     an entry the watcher could not read (registries.InstanceExtra.Invalid) is
//     rejected as malformed.
//  8. Two instances with one address and port: the first by ID is kept, the
//     other rejected (duplicate-endpoint): grpc-go NACKs duplicate addresses.
//  9. Output is sorted (WorkloadEntries by name, inline endpoints by address
//     and port, rejections by instance ID) so that hashes and goldens are stable.
//  10. Inline mode never writes a ServiceEntry the API server or etcd would
//     refuse (limits.go): a service with more than MaxInlineEndpoints (4096)
//     admitted instances, the ServiceEntry CRD's spec.endpoints maxItems
//     (istio.io/api service_entry.proto), or whose inline ServiceEntry's
//     JSON would be over MaxObjectBytes less 8 KiB (etcd's default
//     --max-request-bytes, 1.5 MiB; custom resources are stored as JSON), is
//     emitted in WorkloadEntry form exactly as workloadentry mode emits it,
//     and Result.Fallback gives the reason. The form is decided on every
//     call, so a service that shrinks goes back inline, once under 90 % of
//     both limits (Sticky.InlineFallback), so that a service near them does
//     not switch form on every change. A host too long to
//     name WorkloadEntries (over 242 characters) that must fall back is an
//     error.
//
// # Registry labels
//
// Registry labels are Consul tags and meta, Nacos metadata and Dubbo URL
// parameters. Each label is kept as written, changed or dropped; a changed
// or dropped one is reported (LabelChange) with one reason, the first that
// applies in this order:
//   - volatile: a Dubbo pid, timestamp, …; dropped: it changes on every
//     restart and would rewrite the object for no routing reason.
//   - reserved-prefix: the sanitized key is under meshbridge.io/, istio.io/,
//     kubernetes.io/, k8s.io/ or a subdomain of one (ReservedLabel; istiod
//     derives endpoint mTLS from security.istio.io/tlsMode and the network
//     from topology.istio.io/network, app.kubernetes.io/managed-by marks our
//     ownership); dropped, unless Options.AllowLabels lists it. The
//     meshbridge.io domain and app.kubernetes.io/managed-by can never be
//     listed.
//   - invalid-key: the key holds a character outside printable ASCII, or is
//     not a label key after sanitizing (nothing alphanumeric left, a name
//     over 63 or a prefix over 253 characters); dropped.
//   - invalid-value: the value holds a character outside printable ASCII,
//     or sanitizing would mislead: a non-empty value would become empty, or
//     the trim would drop a '-' or '.' before a digit ("-1" is not "1");
//     dropped.
//   - key-changed: kept under the sanitized key: prefix lower-cased,
//     characters outside [-A-Za-z0-9_.] (and a second '/') replaced by '-',
//     non-alphanumeric ends trimmed. The value may have changed too.
//   - truncated: kept; the sanitized value is over 63 characters and
//     becomes its first 52, '-' and 10 hex of its sha256 (ServiceLabelValue),
//     so that distinct values stay distinct.
//   - value-changed: kept; the value is sanitized like a key's name.
//
// Sanitizing never depends on map order. When several raw keys give one key
// (a collision), the key as written wins if one is, else the lexically
// smallest raw key (byte order); the others are dropped as collision. Then
// an instance keeps at most MaxInstanceLabels labels (255: the WorkloadEntry
// CRD allows 256 and meshbridge.io/service takes one), the first in key
// order; the rest are dropped as too-many-labels and the instance keeps its
// endpoint.
//
// Sticky carries the reported changes to the service's next translation,
// which marks those it repeats for the same instance (LabelChange.Repeated)
// and reports whether the service's set of (raw key, reason) changed
// (Result.LabelSetChanged), so that callers count each change once and log
// a service's changes only when they change.
//
// Concurrency: a Translator is immutable after New and safe for concurrent
// use; the per-service state (Sticky) is kept by the caller.
//
// Not here: choosing between two services that map to one host
// (host-collision, decided by the caller that sees every service), metrics
// (callers count Rejections and LabelChanges by Reason), the store diff, and
// any I/O.
package translate
