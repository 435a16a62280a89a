//go:build tools

// Package tools pins the server binaries built by tools/build.sh.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
