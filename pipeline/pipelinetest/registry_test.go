package pipelinetest

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/registrytest"
)

// fakeSinkLog is a fake registries.Sink that writes each call as a line, in
// order: "listing [keys]", "snapshot <key> [ids]", "error <key>",
// "registry error", "removed <key>" (each + " relist" when marked),
// "synced".
type fakeSinkLog struct {
	mu    sync.Mutex
	lines []string
}

func (f *fakeSinkLog) Snapshot(s registries.Snapshot) {
	var line string
	switch {
	case s.Err != nil && s.Service.Name == "":
		line = "registry error"
	case s.Err != nil:
		line = "error " + s.Service.Key().String()
	case s.Removed:
		line = "removed " + s.Service.Key().String()
	default:
		ids := []string{}
		for _, in := range s.Service.Instances {
			ids = append(ids, in.ID)
		}
		line = fmt.Sprintf("snapshot %s %v", s.Service.Key(), ids)
	}
	if s.Relist {
		line += " relist"
	}
	f.add(line)
}

func (f *fakeSinkLog) Synced(string) { f.add("synced") }

func (f *fakeSinkLog) Listing(_ string, _ registries.Scope, keys, _ []registries.ServiceKey) {
	f.add(fmt.Sprintf("listing %v", slices.SortedFunc(slices.Values(keys), registries.ServiceKey.Compare)))
}

func (f *fakeSinkLog) add(line string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lines = append(f.lines, line)
}

// take returns the lines so far and forgets them.
func (f *fakeSinkLog) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.lines
	f.lines = nil
	return out
}

// TestRegistryThroughReporter: each scripted observation reaches the Sink
// as the Reporter shapes it (a new service listed before its read, a
// removal inside a listing, Synced the Reporter's, errors once per run),
// which keeps the Sink contract (registrytest.Recorder checks it); a new
// run has a new Reporter.
func TestRegistryThroughReporter(t *testing.T) {
	web := S("web", nil, I{Addr: "10.0.0.1", Port: 80})
	web2 := S("web", nil, I{Addr: "10.0.0.2", Port: 80})
	api := S("api", nil, I{Addr: "10.0.0.3", Port: 80})
	empty := S("web", nil)
	log := &fakeSinkLog{}
	var rec *registrytest.Recorder
	sink := registries.SinkFuncs{
		SnapshotFunc: func(s registries.Snapshot) { log.Snapshot(s); rec.Snapshot(s) },
		SyncedFunc:   func(r string) { log.Synced(r); rec.Synced(r) },
		ListingFunc: func(r string, scope registries.Scope, keys, removed []registries.ServiceKey) {
			log.Listing(r, scope, keys, removed)
			rec.Listing(r, scope, keys, removed)
		},
	}
	reg := NewRegistry("a")
	start := func() (stop func()) {
		rec = registrytest.NewRecorder(t)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = reg.Run(ctx, sink)
		}()
		return func() { cancel(); <-done }
	}
	stop := start()
	steps := []struct {
		calls []Call
		want  []string
	}{
		{ListCalls([]registries.Service{web}, false), []string{"listing [web]", "snapshot web [10.0.0.1:80]", "synced"}},
		// A read equal to the last one sent sends nothing (rule 1).
		{[]Call{{Op: OpSnapshot, Service: web}}, nil},
		// A new service is listed before its read.
		{[]Call{{Op: OpSnapshot, Service: api}}, []string{"listing [api web]", "snapshot api [10.0.0.3:80]"}},
		{[]Call{{Op: OpRemove, Service: api}}, []string{"listing [web]", "removed api"}},
		{[]Call{{Op: OpSnapshot, Service: empty, Relist: true}}, []string{"snapshot web [] relist"}},
		// A failure is sent once; the read after it is marked Relist.
		{[]Call{{Op: OpFail, Service: web}, {Op: OpFail, Service: web}, {Op: OpSnapshot, Service: web}},
			[]string{"error web", "snapshot web [10.0.0.1:80] relist"}},
		{[]Call{{Op: OpFail}, {Op: OpFail}}, []string{"registry error"}},
		// The listing after a failed one: new services are read Relist.
		{ListCalls([]registries.Service{web, api}, false), []string{"listing [api web]", "snapshot api [10.0.0.3:80] relist"}},
		{[]Call{{Op: OpDown}}, []string{"registry error", "error api", "error web"}},
		// A relist: its removals and reads are marked Relist.
		{ListCalls([]registries.Service{web2}, true), []string{"listing [web]", "removed api relist", "snapshot web [10.0.0.2:80] relist"}},
		{[]Call{{Op: OpRemove, Service: web2, Relist: true}}, []string{"listing []", "removed web relist"}},
	}
	for i, st := range steps {
		for _, c := range st.calls {
			if err := reg.Do(c); err != nil {
				t.Fatalf("step %d: %v", i, err)
			}
		}
		if diff := cmp.Diff(st.want, log.take()); diff != "" {
			t.Errorf("step %d: Sink calls (-want +got):\n%s", i, diff)
		}
	}
	stop()

	// A restarted watcher has a new Reporter: its first read syncs again,
	// and a read before any listing of its own is listed first.
	stop = start()
	defer stop()
	if listed, err := reg.Listed(); err != nil || listed {
		t.Fatalf("a new run: Listed() = %v, %v; want false", listed, err)
	}
	if err := reg.Do(Call{Op: OpSynced}); err == nil || !strings.Contains(err.Error(), "not synced") {
		t.Errorf("OpSynced before any listing: %v, want an error", err)
	}
	if err := reg.Do(Call{Op: OpSnapshot, Service: web}); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"listing [web]", "snapshot web [10.0.0.1:80]", "synced"}, log.take()); diff != "" {
		t.Errorf("a new run's first read: Sink calls (-want +got):\n%s", diff)
	}
}
