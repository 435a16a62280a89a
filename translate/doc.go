// Package translate turns one registry service (registries.Service with its
// instances) into Istio networking.istio.io/v1 objects: one ServiceEntry for
// its host and, by default or when inline endpoints would not fit (rule 10),
// one WorkloadEntry per usable instance, as *model.Config ready for the
// aggregate store, the Kubernetes writer and `meshbridge translate` (ToYAML,
// ToJSON).
//
// Rules (DESIGN.md §3 and issue 2 unless noted):
//  1. One ServiceEntry per host; metadata.name = host. The host is svc.Host, or
//     the host template (consul: <service>.service.consul, or
//     <service>.service.<dc>.consul for a remote datacenter; file: the name),
//     lower-cased, "_" → "-", and a valid DNS-1123 subdomain / FQDN.
//  2. location MESH_INTERNAL; resolution STATIC (default) or DNS. Under STATIC
//     an instance whose address is a DNS name is rejected (hostname-address).
//  3. Ports are named <protocol>-<number> (http, http2, grpc, tcp; dubbo →
//     tcp-dubbo-<n> with protocol TCP; unknown → tcp). The port is servicePort,
//     else the declared ports, else the port kept in Sticky, else the lowest
//     instance port; once chosen it is kept, like the protocol, so that in
//     workloadentry mode the ServiceEntry's spec and labels stay byte-identical
//     while only instances change (the incremental EDS path of Istio's
//     serviceEntryHandler). Instances on another port map through the
//     WorkloadEntry (or endpoint) ports map.
//  4. WorkloadEntry name = <host>-<10 hex of sha256(registry/instance ID)>; its
//     spec labels are the sanitized instance labels plus meshbridge.io/service,
//     which the ServiceEntry's workloadSelector matches (ServiceLabelValue).
//  5. Every object carries app.kubernetes.io/managed-by=meshbridge,
//     meshbridge.io/registry=<name>, istio.io/rev when configured, and the
//     annotation meshbridge.io/content-hash = ContentHash(labels, spec).
//  6. Registry labels are sanitized to Kubernetes label syntax; what stays
//     invalid, the reserved prefixes meshbridge.io/ and app.kubernetes.io/ (no
//     forged ownership) and volatile Dubbo parameters (pid, timestamp) are
//     dropped with a reason (LabelDrop).
//  7. Everything emitted passes ValidateServiceEntry / ValidateWorkloadEntry,
//     which mirror istio pkg/config/validation (validation.go
//     ValidateServiceEntry, validateWorkloadEntry) and the CRD schema limits.
//     An invalid instance is skipped with a Rejection, never the service.
//  8. Two instances with one address and port: the first by ID is kept, the
//     other rejected (duplicate-endpoint): grpc-go NACKs duplicate addresses.
//  9. Output is sorted (WorkloadEntries by name, inline endpoints by address
//     and port, rejections by instance ID) so that hashes and goldens are stable.
//  10. Inline mode never writes a ServiceEntry the API server or etcd would
//     refuse (issue 4): a service with more than MaxInlineEndpoints (4096)
//     admitted instances, the ServiceEntry CRD's spec.endpoints maxItems
//     (istio.io/api service_entry.proto), or whose inline ServiceEntry's
//     JSON would be over MaxObjectBytes less 8 KiB (etcd's default
//     --max-request-bytes, 1.5 MiB; custom resources are stored as JSON), is
//     emitted in WorkloadEntry form exactly as workloadentry mode emits it,
//     and Result.Fallback gives the reason. The form is decided on every
//     call, so a service that shrinks goes back inline. A host too long to
//     name WorkloadEntries (over 242 characters) that must fall back is an
//     error.
//
// Concurrency: a Translator is immutable after New and safe for concurrent
// use; the per-service state (Sticky) is kept by the caller.
//
// Not here: choosing between two services that map to one host
// (host-collision, decided by the caller that sees every service), metrics
// (callers count Rejections by Reason), the store diff, and any I/O.
package translate
