package dns

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/xds/gen/gentest"
)

var ep = gentest.Endpoint

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

// recordingUpdater is the wrapped serviceentry.XDSUpdater of a test: it
// records what the Updater hands on, each shard's last endpoints and every
// call in order.
type recordingUpdater struct {
	mu     sync.Mutex
	shards map[shardKey][]*model.Endpoint
	calls  []string
}

func newRecordingUpdater() *recordingUpdater {
	return &recordingUpdater{shards: map[shardKey][]*model.Endpoint{}}
}

func (r *recordingUpdater) EDSUpdate(shard, host, namespace string, eps []*model.Endpoint, start time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shards[shardKey{shard, host, namespace}] = eps
	r.calls = append(r.calls, fmt.Sprintf("EDSUpdate %s %s %s %v start=%t", shard, host, namespace, addresses(eps), !start.IsZero()))
}

func (r *recordingUpdater) EDSCacheUpdate(shard, host, namespace string, eps []*model.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.shards[shardKey{shard, host, namespace}] = eps
	r.calls = append(r.calls, fmt.Sprintf("EDSCacheUpdate %s %s %s %v", shard, host, namespace, addresses(eps)))
}

func (r *recordingUpdater) SvcUpdate(shard, host, namespace string, event model.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("SvcUpdate %s %s %s %s", shard, host, namespace, event))
}

func (r *recordingUpdater) ConfigUpdate(req *model.PushRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.calls = append(r.calls, fmt.Sprintf("ConfigUpdate full=%t", req.Full))
}

// get returns shard k's endpoints as address:port/weight, sorted.
func (r *recordingUpdater) get(k shardKey) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return addresses(r.shards[k])
}

func (r *recordingUpdater) recorded() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func addresses(eps []*model.Endpoint) []string {
	var got []string
	for _, e := range eps {
		got = append(got, fmt.Sprintf("%s:%d/%d", e.Address, e.EndpointPort, e.Weight))
	}
	slices.Sort(got)
	return got
}

// TestUpdater pins the package's rules: a name becomes an endpoint per
// address it resolves to (none until it does), a changed answer is handed
// on at the next refresh, a failed lookup keeps the last addresses, a shard
// without names goes through as it is, and a name no shard uses is
// forgotten.
func TestUpdater(t *testing.T) {
	l := &scriptedLookup{answers: map[string][]netip.Addr{}, fail: map[string]bool{}}
	a := newRecordingUpdater()
	var logs harness.LockedBuffer
	d := New(a, Options{Lookup: l.lookup, RefreshRate: 20 * time.Millisecond, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	k := shardKey{"reg", "web.consul", "mesh"}
	l.set("app-1.example", false, "10.0.0.1", "::ffff:10.0.0.2")
	named := &model.Endpoint{Address: "App-1.example", ServicePortName: "http", EndpointPort: 8080, Weight: 3}
	ip := &model.Endpoint{Address: "10.0.0.9", ServicePortName: "http", EndpointPort: 8080, Weight: 1}
	d.EDSUpdate(k.shard, k.host, k.namespace, []*model.Endpoint{named, ip}, time.Now())
	// The first call handed on is the update itself, made before its name
	// could be looked up (the name is queued under the lock the lookup's
	// result is applied under): without the name's endpoint. What the
	// shard holds now may already be the resolved answer.
	if got := a.recorded(); len(got) == 0 || got[0] != "EDSUpdate reg web.consul mesh [10.0.0.9:8080/1] start=true" {
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
		if len(logs.Messages("An endpoint's DNS name did not resolve; its last addresses are kept")) != 1 {
			return errors.New("no warning")
		}
		return nil
	})
	wantShard("lookup failing", "10.0.0.3:8080/3", "10.0.0.9:8080/1")
	l.set("app-1.example", false, "10.0.0.4")
	wantShard("resolves again", "10.0.0.4:8080/3", "10.0.0.9:8080/1")
	if n := len(logs.Messages("An endpoint's DNS name did not resolve; its last addresses are kept")); n != 1 {
		t.Errorf("%d warnings for one failure run, want 1", n)
	}

	// Without a name the shard goes through as it is; the name is
	// forgotten at the next refresh and looked up no more.
	d.EDSUpdate(k.shard, k.host, k.namespace, []*model.Endpoint{ip}, time.Now())
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
	d.EDSUpdate(k.shard, k.host, k.namespace, []*model.Endpoint{named}, time.Now())
	wantShard("name back", "10.0.0.4:8080/3")
	d.SvcUpdate(k.shard, k.host, k.namespace, model.EventDelete)
	if d.nheld.Load() != 0 {
		t.Error("a forgotten service's shard is still held")
	}
}

// TestUpdaterWithoutNamesIsUntouched: a shard with IP addresses only
// is applied as it is, the same slice, and queues no lookup.
func TestUpdaterWithoutNamesIsUntouched(t *testing.T) {
	a := newRecordingUpdater()
	d := New(a, Options{RefreshRate: time.Hour, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	eps := []*model.Endpoint{ep("10.0.0.1", 8080, ""), ep("fd00::1", 8080, "")}
	k := shardKey{"reg", "h", "mesh"}
	d.EDSUpdate(k.shard, k.host, k.namespace, eps, time.Now())
	a.mu.Lock()
	got := a.shards[k]
	a.mu.Unlock()
	if &got[0] != &eps[0] || len(d.names) != 0 || len(d.wake) != 0 {
		t.Error("an IP-only shard was rewritten or queued a lookup")
	}
}

// TestUpdaterHandsOnEachCall: each XDSUpdater method reaches the wrapped
// updater by the method it came in (EDSCacheUpdate stays a cache update,
// also once its name resolves later: the re-resolution is an EDSUpdate
// started then); SvcUpdate and ConfigUpdate pass through; WaitResolved
// returns once the name was looked up and its shard handed on.
func TestUpdaterHandsOnEachCall(t *testing.T) {
	l := &scriptedLookup{answers: map[string][]netip.Addr{}, fail: map[string]bool{}}
	l.set("db.example", false, "10.0.0.7")
	a := newRecordingUpdater()
	d := New(a, Options{Lookup: l.lookup, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})

	d.SvcUpdate("reg", "db.consul", "mesh", model.EventAdd)
	d.EDSCacheUpdate("reg", "db.consul", "mesh", []*model.Endpoint{ep("db.example", 5432, ""), ep("10.0.0.8", 5432, "")})
	d.ConfigUpdate(&model.PushRequest{Full: true})
	d.EDSUpdate("reg", "ip.consul", "mesh", []*model.Endpoint{ep("10.0.0.9", 80, "")}, time.Time{})

	// Not yet running: the name awaits its lookup.
	short, cancelShort := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancelShort()
	if err := d.WaitResolved(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitResolved before Run = %v, want the context's deadline", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	if err := d.WaitResolved(t.Context()); err != nil {
		t.Fatal(err)
	}
	d.SvcUpdate("reg", "db.consul", "mesh", model.EventDelete)

	want := []string{
		"SvcUpdate reg db.consul mesh add",
		"EDSCacheUpdate reg db.consul mesh [10.0.0.8:5432/1]",
		"ConfigUpdate full=true",
		"EDSUpdate reg ip.consul mesh [10.0.0.9:80/1] start=true",
		"EDSUpdate reg db.consul mesh [10.0.0.7:5432/1 10.0.0.8:5432/1] start=true",
		"SvcUpdate reg db.consul mesh delete",
	}
	if got := a.recorded(); !slices.Equal(got, want) {
		t.Errorf("handed on:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if d.nheld.Load() != 0 {
		t.Error("a deleted service's shard is still held")
	}
}
