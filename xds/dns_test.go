package xds

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
)

// scriptedLookup is a fake resolver: a DNS answer that changes or fails on
// demand is what a real resolver cannot be made to give in a test. Each
// name answers what the test last set.
type scriptedLookup struct {
	mu      sync.Mutex
	answers map[string][]netip.Addr
	fail    map[string]bool
}

func (l *scriptedLookup) set(name string, fail bool, addrs ...string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.answers[name], l.fail[name] = nil, fail
	for _, a := range addrs {
		l.answers[name] = append(l.answers[name], netip.MustParseAddr(a))
	}
}

func (l *scriptedLookup) lookup(_ context.Context, name string) ([]netip.Addr, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.fail[name] {
		return nil, errors.New("server misbehaving")
	}
	if len(l.answers[name]) == 0 {
		return nil, fmt.Errorf("lookup %s: no such host", name)
	}
	return l.answers[name], nil
}

// appliedShards records what dnsEndpoints applies, per shard.
type appliedShards struct {
	mu     sync.Mutex
	shards map[shardKey][]string
	pushes int
}

func (a *appliedShards) apply(k shardKey, eps []*model.Endpoint, start time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var got []string
	for _, e := range eps {
		got = append(got, fmt.Sprintf("%s:%d/%d", e.Address, e.EndpointPort, e.Weight))
	}
	slices.Sort(got)
	a.shards[k] = got
	if !start.IsZero() {
		a.pushes++
	}
}

func (a *appliedShards) get(k shardKey) []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.shards[k]
}

// TestDNSEndpoints pins dns.go's rules: a name becomes an endpoint per
// address it resolves to (none until it does), a changed answer is applied
// at the next refresh, a failed lookup keeps the last addresses, a shard
// without names goes through as it is, and a name no shard uses is
// forgotten.
func TestDNSEndpoints(t *testing.T) {
	l := &scriptedLookup{answers: map[string][]netip.Addr{}, fail: map[string]bool{}}
	a := &appliedShards{shards: map[shardKey][]string{}}
	var logs harness.LockedBuffer
	d := newDNSEndpoints(l.lookup, 20*time.Millisecond, slog.New(slog.NewTextHandler(&logs, nil)), a.apply)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	k := shardKey{"reg", "web.consul", "mesh"}
	l.set("app-1.example", false, "10.0.0.1", "::ffff:10.0.0.2")
	named := &model.Endpoint{Address: "App-1.example", ServicePortName: "http", EndpointPort: 8080, Weight: 3}
	ip := &model.Endpoint{Address: "10.0.0.9", ServicePortName: "http", EndpointPort: 8080, Weight: 1}
	d.update(k, []*model.Endpoint{named, ip}, time.Now())
	if got := a.get(k); !slices.Equal(got, []string{"10.0.0.9:8080/1"}) {
		t.Fatalf("before the name resolved: %v", got)
	}
	wantShard := func(what string, want ...string) {
		t.Helper()
		harness.Eventually(t, 5*time.Second, fmt.Sprintf("%s: shard %v", what, want), func() error {
			if got := a.get(k); !slices.Equal(got, want) {
				return fmt.Errorf("shard %v", got)
			}
			return nil
		})
	}
	wantShard("resolved", "10.0.0.1:8080/3", "10.0.0.2:8080/3", "10.0.0.9:8080/1")

	l.set("app-1.example", false, "10.0.0.3")
	wantShard("answer changed", "10.0.0.3:8080/3", "10.0.0.9:8080/1")

	l.set("app-1.example", true)
	harness.Eventually(t, 5*time.Second, "a warning of the failed lookup", func() error {
		if len(logLines(&logs, "An endpoint's DNS name did not resolve; its last addresses are kept")) != 1 {
			return errors.New("no warning")
		}
		return nil
	})
	wantShard("lookup failing", "10.0.0.3:8080/3", "10.0.0.9:8080/1")
	l.set("app-1.example", false, "10.0.0.4")
	wantShard("resolves again", "10.0.0.4:8080/3", "10.0.0.9:8080/1")
	if n := len(logLines(&logs, "An endpoint's DNS name did not resolve; its last addresses are kept")); n != 1 {
		t.Errorf("%d warnings for one failure run, want 1", n)
	}

	// Without a name the shard goes through as it is; the name is
	// forgotten at the next refresh and looked up no more.
	d.update(k, []*model.Endpoint{ip}, time.Now())
	wantShard("name gone", "10.0.0.9:8080/1")
	harness.Eventually(t, 5*time.Second, "the name forgotten", func() error {
		d.mu.Lock()
		defer d.mu.Unlock()
		if len(d.names) != 0 || len(d.held) != 0 {
			return fmt.Errorf("names %d, shards held %d", len(d.names), len(d.held))
		}
		return nil
	})

	// A deleted service's shards are dropped: a later answer applies nothing.
	d.update(k, []*model.Endpoint{named}, time.Now())
	wantShard("name back", "10.0.0.4:8080/3")
	d.forget(k.host, k.namespace)
	if d.nheld.Load() != 0 {
		t.Error("a forgotten service's shard is still held")
	}
}

// TestDNSEndpointsWithoutNamesAreUntouched: a shard with IP addresses only
// is applied as it is, the same slice, and queues no lookup.
func TestDNSEndpointsWithoutNamesAreUntouched(t *testing.T) {
	var got []*model.Endpoint
	d := newDNSEndpoints(nil, time.Hour, slog.New(slog.NewTextHandler(io.Discard, nil)),
		func(_ shardKey, eps []*model.Endpoint, _ time.Time) { got = eps })
	eps := []*model.Endpoint{ep("10.0.0.1", 8080, ""), ep("fd00::1", 8080, "")}
	d.update(shardKey{"reg", "h", "mesh"}, eps, time.Now())
	if &got[0] != &eps[0] || len(d.names) != 0 || len(d.wake) != 0 {
		t.Error("an IP-only shard was rewritten or queued a lookup")
	}
}
