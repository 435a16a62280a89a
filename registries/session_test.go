package registries

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"time"
)

// TestSessionPerReaderRule walks the Session's per-reader rule (rules 1-4)
// step by step: the registry is down at the first failed read, up only when
// no reader's last read failed, a forgotten reader keeps it down no longer,
// and a failing reader that gets through wakes the other failing readers.
func TestSessionPerReaderRule(t *testing.T) {
	type step struct {
		op, reader string
		wantUp     bool
		wantWake   bool // the Recovery channel taken before the step is closed after it
	}
	cases := map[string][]step{
		"one reader": {
			{op: "fail", reader: "a", wantUp: false},
			{op: "ok", reader: "a", wantUp: true},
		},
		"up only when no reader fails": {
			{op: "ok", reader: "a", wantUp: true},
			{op: "fail", reader: "a", wantUp: false},
			{op: "fail", reader: "b", wantUp: false},
			{op: "ok", reader: "a", wantUp: false, wantWake: true},
			{op: "ok", reader: "a", wantUp: false}, // not failing: wakes no one
			{op: "ok", reader: "b", wantUp: true},
		},
		"a success of a reader that never failed brings nothing back": {
			{op: "fail", reader: "a", wantUp: false},
			{op: "ok", reader: "b", wantUp: false},
		},
		"a forgotten reader no longer keeps the registry down": {
			{op: "fail", reader: "a", wantUp: false},
			{op: "fail", reader: "service/gone", wantUp: false},
			{op: "forget", reader: "service/gone", wantUp: false}, // the next success brings it up
			{op: "ok", reader: "a", wantUp: true},
		},
		"listing failed": {
			{op: "ok", reader: "list", wantUp: true},
			{op: "listing-failed", reader: "list", wantUp: false},
			{op: "ok", reader: "list", wantUp: true},
		},
	}
	for name, steps := range cases {
		t.Run(name, func(t *testing.T) {
			h := NewHealth("session-"+name, slog.New(slog.NewTextHandler(io.Discard, nil)))
			var sent []Snapshot
			s := NewSession(h, ReporterConfig{Registry: "session-" + name,
				Sink:   SinkFuncs{SnapshotFunc: func(snap Snapshot) { sent = append(sent, snap) }},
				Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
			for i, st := range steps {
				wake := s.Recovery()
				before := len(sent)
				switch st.op {
				case "fail":
					s.ReadFailed(st.reader, "read", errors.New("boom"))
				case "listing-failed":
					s.ListingFailed(st.reader, "list", Scope{}, errors.New("list failed"), time.Now())
				case "ok":
					s.ReadOK(st.reader)
				case "forget":
					s.ForgetReader(st.reader)
				}
				if up := h.Status().Up; up != st.wantUp {
					t.Errorf("step %d (%s %s): up = %v, want %v", i, st.op, st.reader, up, st.wantUp)
				}
				woken := false
				select {
				case <-wake:
					woken = true
				default:
				}
				if woken != st.wantWake {
					t.Errorf("step %d (%s %s): woke the failing readers = %v, want %v", i, st.op, st.reader, woken, st.wantWake)
				}
				// Only a failed listing reaches the Sink: a read's health is
				// Health's, what is served the Reporter's.
				wantSent := 0
				if st.op == "listing-failed" {
					wantSent = 1
				}
				if got := len(sent) - before; got != wantSent {
					t.Errorf("step %d (%s %s): %d snapshots sent, want %d", i, st.op, st.reader, got, wantSent)
				}
				if wantSent == 1 && (sent[len(sent)-1].Err == nil || sent[len(sent)-1].Service.Name != "") {
					t.Errorf("step %d: sent %+v, want one registry-wide error", i, sent[len(sent)-1])
				}
			}
		})
	}
}

// TestSessionHealthNamesFailingReaders: what keeps a registry down is
// shown: the readers whose last read failed, sorted.
func TestSessionHealthNamesFailingReaders(t *testing.T) {
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := NewSession(NewHealth("session-failing", quiet), ReporterConfig{Registry: "session-failing", Sink: SinkFuncs{}, Logger: quiet})
	s.ReadFailed("service/web", "read", errors.New("boom"))
	s.ReadFailed("catalog", "catalog", errors.New("boom"))
	s.ReadOK("liveness")
	if got := s.Health(s.health); got.Up || !slices.Equal(got.Failing, []string{"catalog", "service/web"}) {
		t.Errorf("Health = %+v, want down, failing [catalog service/web]", got)
	}
	s.ReadOK("catalog")
	s.ForgetReader("service/web")
	s.ReadOK("liveness")
	if got := s.Health(s.health); !got.Up || got.Failing != nil {
		t.Errorf("Health = %+v, want up, nothing failing", got)
	}
}
