//go:build tools

// Package promtool pins the promtool command for `go build
// github.com/prometheus/prometheus/cmd/promtool`.
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
