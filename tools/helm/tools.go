//go:build tools

// Package helm pins the helm command for `go build helm.sh/helm/v3/cmd/helm`.
package helm

import _ "helm.sh/helm/v3/cmd/helm"
