package kube

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

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

// TestLeaseReleasedAtShutdownWhenHeld: a Lease whose record names this
// replica is released at shutdown even when the elector never learnt it
// holds it (its creation was applied after the elector's context was
// cancelled, as by a SIGTERM right after start); one another replica holds
// is left alone.
func TestLeaseReleasedAtShutdownWhenHeld(t *testing.T) {
	k := harness.SharedKube(t)
	ns := k.Namespace(t)
	client, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, tc := range []struct {
		holder, self string
		wantHolder   string
	}{{"a", "a", ""}, {"b", "a", "b"}} {
		name := "lease-" + tc.holder + "-" + tc.self
		lock := &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Name: name, Namespace: ns},
			Client:     client.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: tc.self},
		}
		now := metav1.Now()
		if err := lock.Create(ctx, resourcelock.LeaderElectionRecord{HolderIdentity: tc.holder, LeaseDurationSeconds: 15,
			AcquireTime: now, RenewTime: now}); err != nil {
			t.Fatal(err)
		}
		releaseIfHeld(lock, tc.self, slog.New(slog.NewTextHandler(io.Discard, nil)))
		l, err := client.CoordinationV1().Leases(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := ""
		if l.Spec.HolderIdentity != nil {
			got = *l.Spec.HolderIdentity
		}
		if got != tc.wantHolder {
			t.Errorf("held by %q, released by %q: holder %q, want %q", tc.holder, tc.self, got, tc.wantHolder)
		}
	}
}
