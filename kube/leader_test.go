package kube

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestLeaderElectionOneWriter: two replicas over the same registry contents
// and Lease; exactly one writes. When the leader stops (and releases the
// Lease, as on a graceful shutdown), the other takes over and garbage-
// collects what changed meanwhile. Failover after a crash, without a
// release, is tested with real processes in test/e2e.
func TestLeaderElectionOneWriter(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	le := LeaderElection{LeaseName: "meshbridge", LeaseNamespace: ns,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}

	type replica struct {
		p      *pipeline
		cancel context.CancelFunc
		done   sync.WaitGroup
	}
	start := func(id string) *replica {
		p := newPipeline(t, k, ns, pipelineOptions{})
		p.put("orders", inst("n1/orders-1", "10.0.0.1", 8080, nil))
		p.put("users", inst("n1/users-1", "10.0.1.1", 8080, nil))
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{p: p, cancel: cancel}
		client, err := kubernetes.NewForConfig(k.Config)
		if err != nil {
			t.Fatal(err)
		}
		r.done.Go(func() { p.store.Run(ctx) })
		r.done.Go(func() { p.writer.Run(ctx) })
		p.syncer.Synced(p.registry)
		cfg := le
		cfg.Identity = id
		r.done.Go(func() {
			if err := RunLeaderElection(ctx, client, cfg, p.writer.log, p.writer.Lead); err != nil {
				t.Error(err)
			}
		})
		t.Cleanup(func() { cancel(); r.done.Wait() })
		return r
	}
	a, b := start("a"), start("b")

	deadline := time.Now().Add(le.LeaseDuration + 10*time.Second)
	var leader, follower *replica
	for leader == nil {
		switch {
		case !a.p.writer.LastResync().IsZero():
			leader, follower = a, b
		case !b.p.writer.LastResync().IsZero():
			leader, follower = b, a
		case time.Now().After(deadline):
			t.Fatal("no replica became leader")
		default:
			time.Sleep(20 * time.Millisecond)
		}
	}
	leader.p.settle()
	leader.p.checkMatchesStore()
	if got := follower.p.requests.Writes(); got != 0 {
		t.Fatalf("the follower wrote %d times", got)
	}
	if !follower.p.writer.LastResync().IsZero() {
		t.Fatal("both replicas lead")
	}

	// The leader stops; the registry changes; the follower takes over and
	// brings the cluster in line (deleting users, which it saw go while it
	// was not leading).
	leader.cancel()
	leader.done.Wait()
	follower.p.remove("users")
	deadline = time.Now().Add(le.LeaseDuration + le.RetryPeriod + 5*time.Second)
	for follower.p.writer.LastResync().IsZero() {
		if time.Now().After(deadline) {
			t.Fatal("the follower did not take over")
		}
		time.Sleep(20 * time.Millisecond)
	}
	follower.p.settle()
	follower.p.checkMatchesStore()
}
