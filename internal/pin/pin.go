//go:build tools

// Package pin keeps the product's dependencies in go.mod while packages that
// use them are being written. Temporary: removed once every import is real.
package pin

import (
	_ "github.com/cenkalti/backoff/v4"
	_ "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/http/router/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/extensions/filters/network/http_connection_manager/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	_ "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/google/go-cmp/cmp"
	_ "github.com/hashicorp/consul/api"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/promhttp"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "golang.org/x/time/rate"
	_ "google.golang.org/grpc"
	_ "google.golang.org/grpc/xds"
	_ "istio.io/api/networking/v1"
	_ "sigs.k8s.io/yaml"
)
