package harness

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

func TestIstioVersion(t *testing.T) {
	cases := map[string]struct {
		gomod, want string
	}{
		"in a require block": {"module m\n\nrequire (\n\tistio.io/api v1.31.1\n\tistio.io/istio v0.0.0-2026 // indirect\n)\n", "v0.0.0-2026"},
		"on a require line":  {"module m\n\nrequire istio.io/istio v1.30.0\n", "v1.30.0"},
		"absent":             {"module m\n\nrequire istio.io/api v1.31.1\n", ""},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "go.mod")
			if err := os.WriteFile(p, []byte(c.gomod), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := IstioVersion(p)
			if got != c.want || (err == nil) != (c.want != "") {
				t.Errorf("IstioVersion = %q, %v; want %q", got, err, c.want)
			}
		})
	}
}

// TestStartIstiod: istiod reading the shared control plane is ready when
// returned and answers an ADS client on its plaintext gRPC address.
func TestStartIstiod(t *testing.T) {
	i := StartIstiod(t, SharedKube(t), IstiodOptions{})
	resp, err := http.Get("http://" + i.HTTPAddr + "/ready")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("/ready: %s", resp.Status)
	}
	conn, err := ads.Dial(i.GRPCAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	node := &core.Node{Id: "sidecar~127.0.0.1~harness.default~default.svc.cluster.local"}
	s := ads.NewSotW(t, conn, ads.Options{Node: node}, nil)
	if err := s.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	s.Await(t, readyTimeout, "istiod's Cluster response", func() error {
		if s.State(resourcev3.ClusterType).ACKed == "" {
			return errNotYet
		}
		return nil
	})
}
