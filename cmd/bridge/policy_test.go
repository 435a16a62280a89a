package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// TestPolicyFilesFollowed: the DestinationRules of policy.files (a glob
// relative to the configuration) reach an ADS client's clusters, and
// edits of the file follow: a valid edit is served, an invalid one is
// rejected on /debug/policyz while the last valid rule keeps serving,
// and removing the rule removes the cluster's policy.
func TestPolicyFilesFollowed(t *testing.T) {
	debugAddr, xdsAddr := freeAddr(t), freeAddr(t)
	cfgPath := fileConfig(t, fmt.Sprintf("xds: {address: %q}\nhttp: {address: %q, debugAddress: %q}\npolicy: {files: [policy/*.yaml]}\n",
		xdsAddr, freeAddr(t), debugAddr))
	dir := filepath.Join(filepath.Dir(cfgPath), "policy")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(body string) {
		t.Helper()
		path := filepath.Join(dir, "rules.yaml")
		if err := os.WriteFile(path+".tmp", []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(path+".tmp", path); err != nil {
			t.Fatal(err)
		}
	}
	rule := func(errors, maxPercent int) string {
		return fmt.Sprintf("apiVersion: networking.istio.io/v1\nkind: DestinationRule\nmetadata: {name: web}\nspec:\n"+
			"  host: web.static.local\n  trafficPolicy:\n    outlierDetection: {consecutive5xxErrors: %d, interval: 2s, "+
			"maxEjectionPercent: %d}\n", errors, maxPercent)
	}
	write(rule(3, 50))
	b := runBridge(t, cfgPath)
	<-b.xds.Serving()
	conn, err := ads.Dial(xdsAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := ads.NewSotW(t, conn, ads.Options{Node: &core.Node{Id: "policy-test"}}, nil)
	if err := client.Subscribe(resourcev3.ClusterType, nil); err != nil {
		t.Fatal(err)
	}
	const name = "outbound|8080||web.static.local"
	volume := func(want uint32) func() error {
		return func() error {
			a, ok := client.Resources(resourcev3.ClusterType)[name]
			if !ok {
				return fmt.Errorf("no cluster %s", name)
			}
			var c cluster.Cluster
			if err := a.UnmarshalTo(&c); err != nil {
				return err
			}
			if got := c.GetOutlierDetection().GetFailurePercentageRequestVolume().GetValue(); got != want {
				return fmt.Errorf("failure_percentage_request_volume %d, want %d", got, want)
			}
			return nil
		}
	}
	client.Await(t, 20*time.Second, "the rule's outlier detection", volume(3))

	write(rule(7, 50))
	client.Await(t, 20*time.Second, "the edited rule", volume(7))

	write(rule(9, 300)) // not a percentage
	// Nothing is pushed: the page is polled, not the client awaited.
	harness.Eventually(t, 20*time.Second, "an invalid edit rejected on /debug/policyz", func() error {
		_, body := get(debugAddr, "/debug/policyz")
		var st policy.Status
		if err := json.Unmarshal([]byte(body), &st); err != nil {
			return err
		}
		if len(st.Rejected) != 1 || len(st.Rules) != 1 {
			return fmt.Errorf("/debug/policyz: %s", body)
		}
		return nil
	})
	if err := volume(7)(); err != nil {
		t.Errorf("the last valid rule stopped serving after an invalid edit: %v", err)
	}

	write("")
	client.Await(t, 20*time.Second, "no policy once the rule is gone", volume(0))
}
