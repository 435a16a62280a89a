// Package chart tests the Helm chart charts/meshbridge with helm itself
// (helm.sh/helm/v3 at the version tools/helm pins, built by tools/build.sh
// helm; harness.HelmBin finds it): helm lint and helm template for the
// default values and the value sets in testdata/, each rendered object
// parsed and its important properties asserted; the rendered objects
// server-side applied to a real kube-apiserver (harness.SharedKube, RBAC
// authorizer on) and meshbridge's own Kubernetes writer and leader election
// (package kube) run as the chart's ServiceAccount, by impersonation, to
// show that the chart's Roles allow exactly what the bridge does; the real
// meshbridge binary started with each rendered configuration; and the
// chart's README documenting every value.
//
// Rules:
//  1. helm is the pinned build or none: a missing helm skips the test, or
//     fails it when MESHBRIDGE_REQUIRE_SERVERS=1 (make test), as for every
//     server of test/harness.
//  2. Rendered objects are read as Kubernetes reads them: YAML documents
//     parsed with sigs.k8s.io/yaml into typed objects, never matched as text
//     (NOTES.txt, which is text, excepted).
//  3. Least privilege is tested both ways: every call the writer makes
//     succeeds as the ServiceAccount (its log holds no "forbidden"), and
//     calls outside the chart's Roles (another namespace, another kind,
//     another verb, another Lease, anything cluster-wide) are Forbidden.
//
// Not here: running the pods (no kubelet), the image (make image), the
// Grafana dashboards' content.
package chart
