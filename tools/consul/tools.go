//go:build tools

// Package consul pins the Consul server for `go build github.com/hashicorp/consul`.
package consul

import _ "github.com/hashicorp/consul"
