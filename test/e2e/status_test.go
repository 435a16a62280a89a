package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/hashicorp/consul/api"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/xds"
)

// TestStatusAndConvergence pins README "Commands" (status), "HTTP
// endpoints" (/debug/syncz) and "Metrics" (meshbridge_convergence_seconds):
// a SotW proxyless gRPC stream and a Delta Envoy stream, both following CDS
// and EDS, and an Envoy stream that NACKs its first CDS response, as
// /debug/syncz and `meshbridge status` show them; then a Consul change
// reaches every stage of the convergence histogram.
func TestStatusAndConvergence(t *testing.T) {
	consul := harness.StartConsul(t)
	port := harness.FreePort(t)
	consul.RegisterInstance(t, "echo", "echo-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
	b := startBridge(t, consulRegistry(consul)+"debounce: {after: 10ms}\n")
	cluster := fmt.Sprintf("outbound|%d||echo.service.consul", port)

	conn, err := ads.Dial(b.xdsAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })

	// The streams ACK every response; the versions they got are in their
	// records (State).
	grpcNode := &core.Node{Id: "e2e-status-sotw", Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"GENERATOR": structpb.NewStringValue("grpc"),
	}}}
	sotw := ads.NewSotW(t, conn, ads.Options{Node: grpcNode}, nil)
	for typeURL, names := range map[string][]string{resourcev3.ClusterType: nil, resourcev3.EndpointType: {cluster}} {
		if err := sotw.Subscribe(typeURL, names); err != nil {
			t.Fatal(err)
		}
	}

	delta := ads.NewDelta(t, conn, ads.Options{Node: &core.Node{Id: "e2e-status-delta"}}, nil)
	for typeURL, names := range map[string][]string{resourcev3.ClusterType: nil, resourcev3.EndpointType: {cluster}} {
		if err := delta.Subscribe(typeURL, names, nil); err != nil {
			t.Fatal(err)
		}
	}

	// An Envoy that rejects its first CDS response.
	const nackMessage = "e2e: cluster rejected on purpose"
	cdsResponses := 0 // the handler's, on the stream's receive loop
	nacker := ads.NewSotW(t, conn, ads.Options{Node: &core.Node{Id: "e2e-status-nack"}}, func(r ads.Receipt) error {
		if r.Resp.GetTypeUrl() != resourcev3.ClusterType {
			return nil
		}
		if cdsResponses++; cdsResponses == 1 {
			return errors.New(nackMessage)
		}
		return nil
	})
	if err := nacker.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}

	// /debug/syncz: every stream, what it subscribes to, what it was sent
	// and ACKed (what the client got), the NACK.
	type want struct{ mode, client, cds, eds, nack string }
	wantOf := func() map[string]want {
		rejected := nacker.State(resourcev3.ClusterType)
		if rejected.NACKs == 0 {
			rejected.NACKed = "(not NACKed yet)"
		}
		return map[string]want{
			"e2e-status-sotw": {"sotw", "grpc", sotw.State(resourcev3.ClusterType).Version,
				sotw.State(resourcev3.EndpointType).Version, ""},
			"e2e-status-delta": {"delta", "envoy", delta.State(resourcev3.ClusterType).Version,
				delta.State(resourcev3.EndpointType).Version, ""},
			"e2e-status-nack": {"sotw", "envoy", "", "", rejected.NACKed + " " + nackMessage},
		}
	}
	eventually(t, 20*time.Second, "/debug/syncz shows the three streams as the clients saw them", func() error {
		var st xds.SyncStatus
		if err := json.Unmarshal([]byte(b.get("/debug/syncz")), &st); err != nil {
			return err
		}
		wants := wantOf()
		seen := 0
		for _, s := range st.Streams {
			w, ok := wants[s.Node]
			if !ok {
				continue
			}
			seen++
			got := want{mode: s.Mode, client: s.Client}
			for _, ty := range s.Types {
				switch {
				case ty.Pending:
					return fmt.Errorf("%s %s: version %s awaits its answer", s.Node, ty.TypeURL, ty.Sent)
				case ty.NACK != nil:
					got.nack = ty.NACK.Version + " " + ty.NACK.Message
				case ty.Acked != ty.Sent:
					return fmt.Errorf("%s %s: sent %s, ACKed %s", s.Node, ty.TypeURL, ty.Sent, ty.Acked)
				case ty.TypeURL == resourcev3.ClusterType:
					got.cds = ty.Acked
				case ty.TypeURL == resourcev3.EndpointType:
					got.eds = ty.Acked
				}
			}
			if w.nack == "" && (w.cds == "" || w.eds == "") {
				return fmt.Errorf("%s has not received CDS and EDS yet", s.Node)
			}
			if got != w {
				return fmt.Errorf("%s: /debug/syncz shows %+v, want %+v", s.Node, got, w)
			}
		}
		if seen != len(wants) {
			return fmt.Errorf("/debug/syncz shows %d of the %d streams", seen, len(wants))
		}
		return nil
	})

	// meshbridge status: the same, as tables and as JSON.
	out, err := exec.Command(bins.meshbridge, "status", "--address", b.debugAddr).CombinedOutput()
	if err != nil {
		t.Fatalf("meshbridge status: %v\n%s", err, out)
	}
	table := string(out)
	w := wantOf()
	rejected := nacker.State(resourcev3.ClusterType).NACKed
	for _, row := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^consul-e2e\s+consul\s+yes\s+no\s+1\s+1\s`),
		regexp.MustCompile(`(?m)^e2e-status-sotw\s+127\.0\.0\.1:\d+\s+sotw\s+grpc/unknown\s+CDS\s+` + w["e2e-status-sotw"].cds + `\s+` + w["e2e-status-sotw"].cds + `\s`),
		regexp.MustCompile(`(?m)^\s+EDS\s+` + w["e2e-status-sotw"].eds + `\s+` + w["e2e-status-sotw"].eds + `\s`),
		regexp.MustCompile(`(?m)^e2e-status-delta\s+127\.0\.0\.1:\d+\s+delta\s+envoy/unknown\s+CDS\s+` + w["e2e-status-delta"].cds + `\s+` + w["e2e-status-delta"].cds + `\s`),
		regexp.MustCompile(`(?m)^e2e-status-nack\s+127\.0\.0\.1:\d+\s+sotw\s+envoy/unknown\s+CDS\s+` + rejected + `\s+-\s+-\s+-\s+` +
			regexp.QuoteMeta(rejected+": "+nackMessage) + `$`),
		regexp.MustCompile(`(?m)^Kubernetes output: off`),
	} {
		if !row.MatchString(table) {
			t.Errorf("meshbridge status shows no line matching %s:\n%s", row, table)
		}
	}
	out, err = exec.Command(bins.meshbridge, "status", "--address", "http://"+b.debugAddr, "-o", "json").Output()
	if err != nil {
		t.Fatalf("meshbridge status -o json: %v", err)
	}
	var all struct {
		Registries []struct{ Name string } `json:"registries"`
		XDS        xds.SyncStatus          `json:"xds"`
		Kubernetes struct{ Enabled bool }  `json:"kubernetes"`
	}
	if err := json.Unmarshal(out, &all); err != nil || len(all.Registries) != 1 || all.Registries[0].Name != "consul-e2e" ||
		len(all.XDS.Streams) < 3 || all.Kubernetes.Enabled {
		t.Errorf("meshbridge status -o json (%v):\n%s", err, out)
	}

	// A Consul change reaches every stage of the convergence histogram:
	// the store, the first response, and both EDS subscribers' ACKs.
	before := convergenceCounts(t, b)
	edsBefore := sotw.State(resourcev3.EndpointType).Version
	consul.RegisterInstance(t, "echo", "echo-2", "127.0.0.1", harness.FreePort(t), nil, grpcMeta, api.HealthPassing)
	eventually(t, 20*time.Second, "every convergence stage counts the change", func() error {
		if sotw.State(resourcev3.EndpointType).Version == edsBefore {
			return fmt.Errorf("the SotW stream has no new EDS response yet")
		}
		after := convergenceCounts(t, b)
		for _, stage := range []string{"store", "push", "ack"} {
			if after[stage] <= before[stage] {
				return fmt.Errorf("stage %s: %d samples, as many as before the change", stage, after[stage])
			}
		}
		return nil
	})
}

var convergenceCount = regexp.MustCompile(`(?m)^meshbridge_convergence_seconds_count\{stage="([a-z]+)"\} (\d+)$`)

// convergenceCounts reads the sample count of each stage from /metrics.
func convergenceCounts(t testing.TB, b *bridge) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range convergenceCount.FindAllStringSubmatch(b.get("/metrics"), -1) {
		n, err := strconv.Atoi(m[2])
		if err != nil {
			t.Fatal(err)
		}
		out[m[1]] = n
	}
	if len(out) == 0 && !strings.Contains(b.get("/metrics"), "meshbridge_convergence_seconds") {
		t.Logf("/metrics has no meshbridge_convergence_seconds yet")
	}
	return out
}
