package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	versioned "istio.io/client-go/pkg/clientset/versioned"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestKubernetesOutput runs the bridge in-process with kubernetes.enabled
// against a real kube-apiserver: translate --diff first shows what would be
// created (finding the cluster through kubernetes.kubeconfig, --kubeconfig
// or $KUBECONFIG), the bridge writes it, and translate
// --diff then shows nothing.
// With mcp.enabled as well, the bridge warns about istio#37981.
func TestKubernetesOutput(t *testing.T) {
	k := harness.StartKube(t, "../../kube/testdata/crds/istio-networking.yaml")
	ns := k.Namespace(t)
	cfgPath := fileConfig(t, fmt.Sprintf("xds: {address: %q}\nhttp: {address: %q, debugAddress: 127.0.0.1:0}\noutput: {namespace: %s}\nmcp: {enabled: true}\n"+
		"kubernetes: {enabled: true, kubeconfig: %q, leaderElection: {leaseDuration: 4s, renewDeadline: 3s, retryPeriod: 500ms}}\n",
		freeAddr(t), freeAddr(t), ns, k.Kubeconfig(t)))

	code, out, errOut := run("translate", "--config", cfgPath, "--diff")
	wantCreate := fmt.Sprintf("create ServiceEntry/%s/web.static.local\n", ns)
	if code != 0 || !strings.Contains(out, wantCreate) || !strings.Contains(out, "# 2 to create, 0 to update, 0 to delete") {
		t.Fatalf("translate --diff before the bridge ran: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// Without kubernetes.kubeconfig, --diff finds the cluster as kubectl
	// does (client-go's default loading rules): --kubeconfig, else
	// $KUBECONFIG (else ~/.kube/config, whose path client-go fixes when the
	// process starts: not tested here).
	plain := fileConfig(t, fmt.Sprintf("output: {namespace: %s}\n", ns))
	t.Setenv("KUBECONFIG", k.Kubeconfig(t))
	if code, out, errOut := run("translate", "--config", plain, "--diff"); code != 0 || !strings.Contains(out, wantCreate) {
		t.Errorf("translate --diff with KUBECONFIG: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	t.Setenv("KUBECONFIG", filepath.Join(t.TempDir(), "none"))
	if code, out, errOut := run("translate", "--config", plain, "--diff", "--kubeconfig", k.Kubeconfig(t)); code != 0 || !strings.Contains(out, wantCreate) {
		t.Errorf("translate --diff --kubeconfig: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if code, _, errOut := run("translate", "--config", plain, "--diff"); code != 1 || !strings.Contains(errOut, "give --kubeconfig") {
		t.Errorf("translate --diff with no kubeconfig anywhere: exit %d, stderr:\n%s", code, errOut)
	}

	cfg, err := LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	var logs harness.LockedBuffer
	b, err := newBridge(cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(logs.String(), "istio#37981") {
		t.Errorf("no warning about mcp.enabled with kubernetes.enabled; logs:\n%s", logs.String())
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- b.run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()

	client, err := versioned.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		se, err := client.NetworkingV1().ServiceEntries(ns).Get(context.Background(), "web.static.local", metav1.GetOptions{})
		if err == nil {
			if se.Labels["app.kubernetes.io/managed-by"] != "meshbridge" || se.Labels["meshbridge.io/registry"] != "static" {
				t.Fatalf("labels %v", se.Labels)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ServiceEntry after 30s: %v\nlogs:\n%s", err, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for {
		st := b.kubez()
		if st.Leading && st.Pending == 0 && !st.LastResync.IsZero() {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	code, out, errOut = run("translate", "--config", cfgPath, "--diff")
	if code != 0 || out != fmt.Sprintf("# 0 to create, 0 to update, 0 to delete, 0 conflicts (names held by objects meshbridge does not own) in namespace %s\n", ns) {
		t.Fatalf("translate --diff after the bridge wrote: exit %d, stdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
}
