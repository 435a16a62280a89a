package xds

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/meshbridge/meshbridge/model"
)

// pushEvent is one request fed to the debounce loop at a fake time.
type pushEvent struct {
	at   time.Duration
	full bool
	host string
}

// pushed is one push the loop made: when (fake time since start), which kind,
// which hosts.
type pushed struct {
	At    time.Duration
	Full  bool
	Hosts []string
}

// TestDebounceOptions: Debounce is taken as given (the configuration holds
// the defaults): Max is at least After, and EDSMax is kept within [After,
// Max].
func TestDebounceOptions(t *testing.T) {
	const ms = time.Millisecond
	tests := map[string]struct {
		in   Debounce
		want debounceOptions
	}{
		"zero: no quiet period, no wait": {Debounce{}, debounceOptions{}},
		"the configuration's defaults": {Debounce{After: 100 * ms, Max: 10 * time.Second, EDSMax: 500 * ms, EDS: true},
			debounceOptions{after: 100 * ms, max: 10 * time.Second, edsMax: 500 * ms, edsDebounce: true}},
		"eds max below after": {Debounce{After: time.Second, Max: 10 * time.Second, EDSMax: 200 * ms, EDS: true}, debounceOptions{after: time.Second, max: 10 * time.Second, edsMax: time.Second, edsDebounce: true}},
		"eds max above max":   {Debounce{After: 100 * ms, Max: 300 * ms, EDSMax: 500 * ms}, debounceOptions{after: 100 * ms, max: 300 * ms, edsMax: 300 * ms}},
		"max below after":     {Debounce{After: 100 * ms, Max: 10 * ms, EDSMax: 500 * ms}, debounceOptions{after: 100 * ms, max: 100 * ms, edsMax: 100 * ms}},
		"set":                 {Debounce{After: 10 * ms, Max: time.Second, EDSMax: 50 * ms}, debounceOptions{after: 10 * ms, max: time.Second, edsMax: 50 * ms}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.in.options(); got != tc.want {
				t.Errorf("options() = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestDebounce(t *testing.T) {
	const ms = time.Millisecond
	defaults := Debounce{After: 100 * ms, Max: 10 * time.Second, EDSMax: 500 * ms, EDS: true}.options() // the configuration's
	// churn is eight EDS-only requests 70 ms apart, "a" to "h", never a
	// quiet period; request full (an index, -1 for none) is a full one.
	churn := func(full int) []pushEvent {
		var events []pushEvent
		for i := range 8 {
			events = append(events, pushEvent{time.Duration(i) * 70 * ms, i == full, string(rune('a' + i))})
		}
		return events
	}
	tests := map[string]struct {
		opts     debounceOptions
		pushTime time.Duration // how long each push takes
		events   []pushEvent
		want     []pushed
	}{
		"should send full updates in batches": {
			opts:   defaults,
			events: []pushEvent{{0, true, "a"}, {10 * ms, true, "b"}, {20 * ms, true, "c"}},
			want:   []pushed{{120 * ms, true, []string{"a", "b", "c"}}},
		},
		"should send full updates in batches, partial updates immediately": {
			opts:   Debounce{After: 100 * ms, Max: 10 * time.Second, EDSMax: 500 * ms, EDS: false}.options(),
			events: []pushEvent{{0, true, "a"}, {10 * ms, false, "b"}, {20 * ms, true, "c"}},
			want:   []pushed{{10 * ms, false, []string{"b"}}, {120 * ms, true, []string{"a", "c"}}},
		},
		"should send partial updates in batches when EDS debounce is on": {
			opts:   defaults,
			events: []pushEvent{{0, false, "a"}, {10 * ms, false, "b"}},
			want:   []pushed{{110 * ms, false, []string{"a", "b"}}},
		},
		"should turn a batch into a full push when one request is full": {
			opts:   defaults,
			events: []pushEvent{{0, false, "a"}, {10 * ms, true, "b"}},
			want:   []pushed{{110 * ms, true, []string{"a", "b"}}},
		},
		"should send separate pushes for requests further apart than the quiet period": {
			opts:   defaults,
			events: []pushEvent{{0, true, "a"}, {150 * ms, true, "b"}},
			want:   []pushed{{100 * ms, true, []string{"a"}}, {250 * ms, true, []string{"b"}}},
		},
		"should push at the cap while requests keep arriving within the quiet period": {
			opts: Debounce{After: 100 * ms, Max: 300 * ms, EDSMax: 500 * ms, EDS: true}.options(),
			events: []pushEvent{
				{0, true, "a"}, {70 * ms, true, "b"}, {140 * ms, true, "c"}, {210 * ms, true, "d"}, {280 * ms, true, "e"},
				{350 * ms, true, "f"}, {420 * ms, true, "g"}, {490 * ms, true, "h"},
			},
			want: []pushed{
				{300 * ms, true, []string{"a", "b", "c", "d", "e"}},
				{590 * ms, true, []string{"f", "g", "h"}},
			},
		},
		"should push an EDS-only batch at its own cap while endpoint requests keep arriving": {
			opts:   Debounce{After: 100 * ms, Max: 10 * time.Second, EDSMax: 300 * ms, EDS: true}.options(),
			events: churn(-1),
			want: []pushed{
				{300 * ms, false, []string{"a", "b", "c", "d", "e"}},
				{590 * ms, false, []string{"f", "g", "h"}},
			},
		},
		"should hold a batch that turns full to the full cap": {
			opts:   Debounce{After: 100 * ms, Max: 10 * time.Second, EDSMax: 300 * ms, EDS: true}.options(),
			events: churn(1),
			want:   []pushed{{590 * ms, true, []string{"a", "b", "c", "d", "e", "f", "g", "h"}}},
		},
		"should merge requests arriving during a push into one push after it": {
			opts:     defaults,
			pushTime: 200 * ms,
			events:   []pushEvent{{0, true, "a"}, {150 * ms, true, "b"}, {160 * ms, false, "c"}},
			want:     []pushed{{100 * ms, true, []string{"a"}}, {300 * ms, true, []string{"b", "c"}}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				assertEqual(t, tc.want, runDebounce(t, tc.opts, tc.pushTime, tc.events))
			})
		})
	}
}

// runDebounce feeds events to a debounce loop at their fake times and returns
// the pushes it made. Must run inside a synctest bubble.
func runDebounce(t *testing.T, opts debounceOptions, pushTime time.Duration, events []pushEvent) []pushed {
	t.Helper()
	var (
		mu   sync.Mutex
		got  []pushed
		q    = newRequestQueue()
		base = time.Now()
	)
	push := func(req *model.PushRequest) {
		var hosts []string
		for k := range req.ConfigsUpdated {
			hosts = append(hosts, k.Name)
		}
		slices.Sort(hosts)
		mu.Lock()
		got = append(got, pushed{At: time.Since(base), Full: req.Full, Hosts: hosts})
		mu.Unlock()
		time.Sleep(pushTime)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		debounce(ctx, q, func() debounceOptions { return opts }, time.Now, push)
	}()
	for _, e := range events {
		time.Sleep(e.at - time.Since(base))
		reason := model.EndpointUpdate
		if e.full {
			reason = model.ServiceUpdate
		}
		q.add(&model.PushRequest{
			Full:           e.full,
			ConfigsUpdated: map[model.ConfigKey]struct{}{model.ServiceKey("mesh", e.host): {}},
			Reason:         model.NewReason(reason),
			Start:          time.Now(),
		})
	}
	// Long past every timer of every case: the loop is idle again.
	time.Sleep(opts.max + time.Second)
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	return got
}

// TestQueueWaitIdle: waitIdle returns only once every request added has
// been taken and its push reported, merged requests counted each.
func TestQueueWaitIdle(t *testing.T) {
	q := newRequestQueue()
	if err := q.waitIdle(t.Context()); err != nil {
		t.Fatalf("an empty queue is idle: %v", err)
	}
	q.add(&model.PushRequest{})
	q.add(&model.PushRequest{Full: true})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel()
	if err := q.waitIdle(ctx); err == nil {
		t.Fatal("idle with two requests pending")
	}
	req, n := q.take()
	if req == nil || !req.Full || n != 2 {
		t.Fatalf("take = %+v, %d; want the merged full request of 2", req, n)
	}
	q.add(&model.PushRequest{})
	q.pushed(n)
	ctx2, cancel2 := context.WithTimeout(t.Context(), 10*time.Millisecond)
	defer cancel2()
	if err := q.waitIdle(ctx2); err == nil {
		t.Fatal("idle with a request added after the take")
	}
	_, n = q.take()
	q.pushed(n)
	if err := q.waitIdle(t.Context()); err != nil {
		t.Fatalf("every request pushed: %v", err)
	}
}
