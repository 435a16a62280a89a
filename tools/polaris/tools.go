//go:build tools

// Package polaris pins the Polaris server for `go build github.com/polarismesh/polaris`.
package polaris

import _ "github.com/polarismesh/polaris"
