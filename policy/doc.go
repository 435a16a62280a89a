// Package policy reads the traffic policy meshbridge serves proxyless gRPC
// clients over direct xDS: Istio's DestinationRules and VirtualServices
// (networking.istio.io/v1), from YAML files (config key policy.files), in
// the schema users already write for istiod.
//
// Rules:
//  1. A file holds any number of YAML documents. A DestinationRule or
//     VirtualService document is read with apiVersion
//     networking.istio.io/v1, v1beta1 or v1alpha3; a document of another
//     kind is ignored with a warning naming it. An unknown field is an
//     error, as istiod's validation makes it.
//  2. A DestinationRule is validated as istiod validates one, for the
//     fields meshbridge serves and their neighbours: a host (an FQDN, or
//     "*" or "*.<suffix>"), unique subset names that are DNS-1123
//     labels, subset labels that are Kubernetes labels, positive
//     durations, percentages within 0-100, a port-level setting per port
//     number 1-65535; for a VirtualService, hosts (no "*" alone), routes
//     with destination weights summing to 100 when there are several,
//     durations, retryOn conditions, fault percentages and statuses, RE2
//     regexes, lower-case header names (virtualservice.go). An invalid
//     rule is rejected with its reason (log
//     line, meshbridge_policy_rules{state="rejected"}, /debug/policyz), and the last valid version of the
//     same rule (namespace/name) keeps serving: an invalid edit never
//     removes a working policy. A file that cannot be read or parsed at
//     all keeps the rules it held last.
//  3. One rule per host: the first in the order of the globs, then of the
//     file names, then of the documents wins; a later rule for the same
//     host is rejected (its reason names the winner).
//  4. A host's rule is the most specific match (Rules.For): the rule of
//     the host itself, else the wildcard rule with the longest suffix
//     ("*.service.consul" before "*.consul" before "*"). Hosts compare in
//     lower case.
//  5. Rules hands out the same object for a rule whose content did not
//     change, so that the xDS server's full push (model.Service.Policy and
//     Routing, compared by identity) regenerates only the resources of
//     hosts whose rule changed.
//  6. What a rule sets that no proxyless client is served (xds/gen
//     Unserved, UnservedRouting), and what some client accepts without
//     applying it (Unenforced), is logged once per version of the rule and
//     shown in its status.
//  7. Files are followed with internal/filewatch's loop: a change is read
//     once the file has settled, and every Resync anyway; a glob matching
//     new files picks them up.
//  8. One VirtualService per host: each host of a VirtualService is served
//     its routes unless an earlier VirtualService (in the order of rule 3)
//     has the host, which is then rejected for that host only. A
//     VirtualService whose gateways omit "mesh" applies to gateways only
//     and is not served (it is listed as rejected, with that reason).
//     Hosts match as in rule 4 (Rules.RoutingFor).
//  9. An object whose exportTo limits it to some namespaces (".", "~",
//     names) is rejected with that reason: meshbridge serves every client
//     the same rules, so it can neither serve it only where it is
//     exported nor ignore the limit. Empty exportTo and "*" are served.
//  10. With policy.kubernetes (Config.Kubernetes), DestinationRules and
//     VirtualServices are also read from a cluster by client-go informers
//     (istio.io/client-go), in the namespaces configured or all. They come
//     before the files' in rule 3's order, oldest first (creation time,
//     then namespace and name, as istiod orders them), and are validated
//     as the files' are. No rule is served until every informer has
//     listed; a list or watch error is logged, shown on /debug/policyz
//     (kubernetes.lastError) and retried by the informers, and the rules
//     as last read keep serving meanwhile.
package policy
