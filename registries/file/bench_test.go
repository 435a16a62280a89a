package file

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// benchFile returns a registry file of n services with 10 instances each,
// every instance with the labels a real catalog carries; the instances of
// service changed get version v2 instead of v1 (-1: none).
func benchFile(n, changed int) []byte {
	var b strings.Builder
	b.WriteString("services:\n")
	for i := range n {
		fmt.Fprintf(&b, "- host: svc-%05d.team-%02d.static.local\n", i, i%40)
		b.WriteString("  ports: [{number: 8080, protocol: grpc}, {number: 9090, protocol: http}]\n  instances:\n")
		version := "v1"
		if i == changed {
			version = "v2"
		}
		for j := range 10 {
			fmt.Fprintf(&b, "  - {address: 10.%d.%d.%d, port: 8080, weight: %d, locality: eu-west-1/eu-west-1%c/rack-%d, "+
				"labels: {app: svc-%05d, version: %s, env: production, team: team-%02d, tier: backend, "+
				"topology.kubernetes.io/zone: eu-west-1%c, build: \"2024.%02d.%d\"}}\n",
				i/250, i%250, j+1, 1+j%3, 'a'+rune(j%3), j, i, version, i%40, 'a'+rune(j%3), 1+i%12, j)
		}
	}
	return []byte(b.String())
}

// BenchmarkReloadOneChange measures one reload (read, parse, diff and
// emit) of a file rewritten with one service changed: the cost of an edit
// to a large file. The files have the simple block layout (doc.go rule 5),
// so only the changed service is parsed; "crlf" is the same file with CRLF
// line breaks, which is parsed whole.
func BenchmarkReloadOneChange(b *testing.B) {
	for _, bc := range []struct {
		n    int
		crlf bool
	}{{n: 1000}, {n: 10000}, {n: 1000, crlf: true}} {
		name := fmt.Sprintf("services=%d", bc.n)
		if bc.crlf {
			name += ",crlf"
		}
		b.Run(name, func(b *testing.B) {
			n := bc.n
			versions := [2][]byte{benchFile(n, -1), benchFile(n, n/2)}
			if bc.crlf {
				for i, v := range versions {
					versions[i] = bytes.ReplaceAll(v, []byte("\n"), []byte("\r\n"))
				}
			}
			path := filepath.Join(b.TempDir(), "services.yaml")
			r, err := New(Config{Name: "bench", Path: path, Resync: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			if err != nil {
				b.Fatal(err)
			}
			emitted := 0
			sink := registries.SinkFuncs{SnapshotFunc: func(s registries.Snapshot) {
				if s.Err != nil {
					b.Fatal(s.Err)
				}
				emitted++
			}}
			if err := os.WriteFile(path, versions[0], 0o644); err != nil {
				b.Fatal(err)
			}
			rep := registries.NewSession(r.health, registries.ReporterConfig{Registry: "bench", Sink: sink, Logger: r.log})
			if !r.reload(rep) {
				b.Fatal("first read failed")
			}
			emitted = 0
			b.SetBytes(int64(len(versions[0])))
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				b.StopTimer()
				if err := os.WriteFile(path, versions[(i+1)%2], 0o644); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
				if !r.reload(rep) {
					b.Fatal("reload failed")
				}
			}
			b.StopTimer()
			if emitted != b.N {
				b.Fatalf("%d snapshots for %d reloads of one changed service", emitted, b.N)
			}
		})
	}
}
