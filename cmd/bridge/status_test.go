package main

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// statusSyncz is a /debug/syncz page at 12:00:00: a SotW proxyless gRPC
// stream (grpc-js, served round robin for LEAST_REQUEST), a Delta Envoy
// stream that NACKed, and istiod on the MCP listener.
const statusSyncz = `{
  "time": "2026-01-02T12:00:00Z",
  "streams": [
    {"listener": "xds", "id": 1, "mode": "sotw", "node": "grpc-1", "client": "grpc", "peer": "127.0.0.1:50001",
     "userAgent": "gRPC Node Pure JS 1.14.1", "family": "grpc-js", "lacks": ["lb_policy LEAST_REQUEST (gRFC A48)"],
     "substituted": ["loadBalancer.simple:LEAST_REQUEST"],
     "connected": "2026-01-02T11:00:00Z", "lastAck": "2026-01-02T11:59:58Z",
     "types": [
       {"typeURL": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "resources": 1, "sent": "3", "sentNonce": "5",
        "pending": false, "acked": "3", "ackedAt": "2026-01-02T11:59:58Z"},
       {"typeURL": "type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment", "resources": 1, "sent": "7",
        "sentNonce": "6", "pending": true, "acked": "6", "ackedAt": "2026-01-02T11:55:00Z"}
     ]},
    {"listener": "xds", "id": 2, "mode": "delta", "node": "envoy-1", "client": "envoy", "peer": "127.0.0.1:50002",
     "userAgent": "envoy", "family": "envoy",
     "connected": "2026-01-02T11:00:00Z",
     "types": [
       {"typeURL": "type.googleapis.com/envoy.config.cluster.v3.Cluster", "wildcard": true, "sent": "3", "pending": false,
        "lastNack": {"version": "3", "message": "cluster rejected:\n  bad port", "at": "2026-01-02T11:59:00Z"}}
     ]},
    {"listener": "mcp", "id": 1, "mode": "sotw", "node": "istiod-1", "client": "mcp", "peer": "10.0.0.9:41000",
     "connected": "2026-01-02T10:00:00Z", "lastAck": "2026-01-02T09:00:00Z",
     "types": [
       {"typeURL": "networking.istio.io/v1/ServiceEntry", "sent": "4", "pending": false, "acked": "4",
        "ackedAt": "2026-01-01T09:00:00Z"}
     ]}
  ]
}`

const statusRegistryz = `[
  {"name": "consul-dc1", "type": "consul", "synced": true, "services": 12, "instances": 40, "servedInstances": 40,
   "staleServices": 0, "errors": 0, "lastListing": "2026-01-02T11:59:57Z", "stale": false, "up": true,
   "lastSuccess": "2026-01-02T11:59:59Z"},
  {"name": "nacos-prod", "type": "nacos", "synced": true, "services": 3, "instances": 9, "servedInstances": 9,
   "staleServices": 3, "errors": 4, "lastError": "dial tcp 10.0.0.1:9848: connection refused",
   "lastListing": "2026-01-02T11:54:50Z", "stale": true, "up": false, "heldDown": 2,
   "deleteGuard": {"since": "2026-01-02T11:58:00Z", "services": 3, "instances": 9}},
  {"name": "zk", "type": "zookeeper", "synced": false, "services": 0, "instances": 0, "servedInstances": 0,
   "staleServices": 0, "errors": 1, "lastError": "zk: could not connect to a server", "stale": false, "up": false}
]`

func TestPrintStatus(t *testing.T) {
	tests := map[string]struct {
		registries, syncz, kubez string
		want                     string
	}{
		"registries, streams of both listeners, the writer leading with an error": {
			registries: statusRegistryz, syncz: statusSyncz,
			kubez: `{"enabled": true, "namespace": "mesh", "leading": true, "pending": 2, "lastResync": "2026-01-02T11:57:30Z",
			  "lastError": "Kubernetes write failed; retrying: ServiceEntry/mesh/a: apply: 503", "lastErrorTime": "2026-01-02T11:59:50Z"}`,
			want: `
REGISTRY    TYPE       UP   STALE  SERVICES  INSTANCES  LAST SYNC  HELD DELETES                                                  LAST ERROR
consul-dc1  consul     yes  no     12        40         3s         -                                                             -
nacos-prod  nacos      no   yes    3         9          5m10s      3 services (9 instances) by the delete guard, 2 in hold-down  dial tcp 10.0.0.1:9848: connection refused
zk          zookeeper  no   no     0         0          never      -                                                             zk: could not connect to a server

NODE      PEER             MODE   CLIENT              TYPE             SENT  ACKED  LAST ACK  SUBSTITUTED                        LAST NACK
grpc-1    127.0.0.1:50001  sotw   grpc/grpc-js        CDS              3     3      2s        loadBalancer.simple:LEAST_REQUEST  -
                                                      EDS              7     6      5m                                           -
envoy-1   127.0.0.1:50002  delta  envoy               CDS              3     -      -         -                                  3: cluster rejected: bad port
istiod-1  10.0.0.9:41000   sotw   mcp (mcp listener)  ServiceEntry v1  4     4      1d3h      -                                  -

KUBERNETES NAMESPACE  LEADER  QUEUE  LAST RESYNC  LAST ERROR
mesh                  yes     2      2m30s        Kubernetes write failed; retrying: ServiceEntry/mesh/a: apply: 503 (10s ago)
`,
		},
		"nothing connected, Kubernetes output off": {
			registries: `[]`, syncz: `{"time": "2026-01-02T12:00:00Z", "streams": []}`, kubez: `{"enabled": false, "leading": false, "pending": 0}`,
			want: `
REGISTRY  TYPE  UP  STALE  SERVICES  INSTANCES  LAST SYNC  HELD DELETES  LAST ERROR

No xDS streams.

Kubernetes output: off (kubernetes.enabled is false).
`,
		},
		"a stream before its first request": {
			registries: `[]`, kubez: `{"enabled": false}`,
			syncz: `{"time": "2026-01-02T12:00:00Z", "streams": [{"listener": "xds", "id": 9, "mode": "delta", "node": "", "client": "",
			  "peer": "127.0.0.1:1", "connected": "2026-01-02T12:00:00Z", "types": []}]}`,
			want: `
REGISTRY  TYPE  UP  STALE  SERVICES  INSTANCES  LAST SYNC  HELD DELETES  LAST ERROR

NODE  PEER         MODE   CLIENT  TYPE  SENT  ACKED  LAST ACK  SUBSTITUTED  LAST NACK
-     127.0.0.1:1  delta  -       -     -     -      -         -            -

Kubernetes output: off (kubernetes.enabled is false).
`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := printStatus(&out, map[string]json.RawMessage{
				"registries": json.RawMessage(tc.registries), "xds": json.RawMessage(tc.syncz), "kubernetes": json.RawMessage(tc.kubez),
			})
			if err != nil {
				t.Fatal(err)
			}
			if got, want := out.String(), strings.TrimPrefix(tc.want, "\n"); got != want {
				t.Errorf("got:\n%s\nwant:\n%s", got, want)
			}
		})
	}
}

func TestAge(t *testing.T) {
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	for d, want := range map[time.Duration]string{
		0: "0s", 400 * time.Millisecond: "0s", 59 * time.Second: "59s", time.Minute: "1m", 61 * time.Second: "1m1s",
		2*time.Hour + 5*time.Minute + 9*time.Second: "2h5m", 27 * time.Hour: "1d3h", -time.Second: "0s",
	} {
		if got := age(now, now.Add(-d)); got != want {
			t.Errorf("age(%v) = %q, want %q", d, got, want)
		}
	}
	if got := age(now, time.Time{}); got != "-" {
		t.Errorf("age of a zero time = %q, want -", got)
	}
}

// TestStatusCommand runs the command against a fake debug address: the
// JSON output holds each page, and an unreachable address or a page that
// fails is a clear error with exit code 1.
func TestStatusCommand(t *testing.T) {
	pages := map[string]string{
		"/debug/registryz": statusRegistryz,
		"/debug/syncz":     statusSyncz,
		"/debug/kubez":     `{"enabled": false, "leading": false, "pending": 0}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := pages[r.URL.Path]
		if !ok {
			http.Error(w, "404 page not found", http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(body))
	}))
	defer srv.Close()
	notFound := httptest.NewServer(http.NotFoundHandler())
	defer notFound.Close()
	// The real handler of http.address (probes and /metrics).
	httpAddress := httptest.NewServer((&bridge{metrics: newMetricsRegistry()}).httpHandler())
	defer httpAddress.Close()
	metrics := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("# HELP meshbridge_build_info ...\n"))
	}))
	defer metrics.Close()

	tests := map[string]struct {
		args     []string
		wantCode int
		wantOut  []string
		wantErr  string
	}{
		"a table by default": {
			args: []string{"status", "--address", srv.URL}, wantOut: []string{"consul-dc1", "grpc-1", "Kubernetes output: off"},
		},
		"host:port without a scheme": {
			args: []string{"status", "--address", strings.TrimPrefix(srv.URL, "http://")}, wantOut: []string{"consul-dc1"},
		},
		"-o json holds each page under its key": {
			args: []string{"status", "--address", srv.URL, "-o", "json"},
			wantOut: []string{`"registries": [`, `"xds": {`, `"kubernetes": {`, `"node": "grpc-1"`,
				`"message": "cluster rejected:\n  bad port"`},
		},
		"an unreachable address": {
			args: []string{"status", "--address", "http://" + freeAddr(t)}, wantCode: 1,
			wantErr: "meshbridge status: cannot reach http://127.0.0.1:",
		},
		"a page that is not there": {
			args: []string{"status", "--address", notFound.URL}, wantCode: 1,
			wantErr: "/debug/registryz: 404 Not Found: is --address the bridge's http.debugAddress",
		},
		"the bridge's http.address: 404, and a hint at http.debugAddress": {
			args: []string{"status", "--address", httpAddress.URL}, wantCode: 1,
			wantErr: "404 Not Found: is --address the bridge's http.debugAddress (default http://127.0.0.1:15015)? " +
				"http.address serves only /metrics, /healthz and /readyz",
		},
		"a page that answers something else than JSON": {
			args: []string{"status", "--address", metrics.URL}, wantCode: 1, wantErr: "is not JSON",
		},
		"an unknown output format": {
			args: []string{"status", "-o", "yaml"}, wantCode: 2, wantErr: `-o: "yaml" is not one of table, json`,
		},
		"a stray argument": {
			args: []string{"status", "now"}, wantCode: 2, wantErr: `unexpected argument "now"`,
		},
		"--help": {
			args: []string{"status", "--help"}, wantOut: []string{"Usage: meshbridge status", "-address"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, out, errs := run(tc.args...)
			ok := code == tc.wantCode && strings.Contains(errs, tc.wantErr)
			for _, w := range tc.wantOut {
				ok = ok && strings.Contains(out, w)
			}
			if !ok {
				t.Fatalf("exit %d (want %d)\nstdout: %s\nstderr: %s\nwant stdout ⊇ %q, stderr ⊇ %q", code, tc.wantCode, out, errs, tc.wantOut, tc.wantErr)
			}
		})
	}
}
