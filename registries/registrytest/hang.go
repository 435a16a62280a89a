package registrytest

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/test/harness"
)

// Hang targets (the registries' operator promise, registries.Liveness): a
// hung server is seen down within HangDownWithin of hanging, and up within
// HangUpWithin of answering again.
const (
	HangDownWithin = 15 * time.Second
	HangUpWithin   = 2 * time.Second
)

// Hang is a registry under a hung server, for CheckHang.
type Hang struct {
	// Registry is the registry's name; Health its health.
	Registry string
	Health   func() registries.HealthStatus
	// Pause and Resume hang the real server the test started and let it go
	// on (SIGSTOP and SIGCONT by its PID).
	Pause, Resume func()
	// Logs is the registry's log, at info level or below.
	Logs *harness.LockedBuffer
	// Hold is how long the server stays hung once seen down.
	Hold time.Duration
}

// CheckHang hangs the server and checks what an operator is promised:
//
//  1. the registry is down (Health, meshbridge_registry_up 0) within
//     HangDownWithin, with one "read failed" log line;
//  2. nothing is removed nor emptied while it hangs nor after (rec's
//     snapshots), the last-known-good state is kept;
//  3. after Resume it is up within HangUpWithin, with one "read
//     succeeded again" log line whose downFor is the outage's length within
//     the probe interval (registries.DefaultLivenessInterval) either way:
//     short of it when the first unanswered probe was sent after the pause,
//     past it when a probe sent just before the pause went unanswered (the
//     outage counts from its earliest sign, registries.Health.FailSince).
//
// It returns how long detection and recovery took, for the test's log.
func CheckHang(t *testing.T, rec *Recorder, h Hang) (down, up time.Duration) {
	t.Helper()
	before := rec.State()
	paused := time.Now()
	h.Pause()
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			h.Resume()
		}
	}
	t.Cleanup(resume)
	harness.EventuallyTrue(t, HangDownWithin, "the hung registry seen down", func() bool {
		return !h.Health().Up && RegistryUp(t, h.Registry) == 0
	})
	down = time.Since(paused)
	<-time.After(h.Hold) // the hang's length: a scenario parameter, not a wait for a condition
	st := rec.State()
	for k, good := range before.Good {
		if !registries.SameInstances(st.Good[k], good) {
			t.Errorf("service %s while hung: %v, want its last-known-good %v", k, st.Good[k], good)
		}
	}
	resume()
	back := time.Now()
	harness.EventuallyTrue(t, HangUpWithin, "the registry up again after the server resumed", func() bool {
		return h.Health().Up && RegistryUp(t, h.Registry) == 1
	})
	up = time.Since(back)
	outage := back.Sub(paused)
	for _, s := range rec.Snapshots()[len(before.All):] {
		if s.Removed || (s.Err == nil && s.Service.Name != "" && len(s.Service.Instances) == 0 && len(before.Good[s.Service.Key().String()]) > 0) {
			t.Errorf("snapshot %+v around the hang removed or emptied a service", s)
		}
	}
	out := h.Logs.String()
	for _, line := range []string{"Registry read failed; serving its last-known-good state", "Registry read succeeded again"} {
		if n := strings.Count(out, line); n != 1 {
			t.Errorf("%d log lines %q, want 1", n, line)
		}
	}
	if m := downForRE.FindStringSubmatch(out); m == nil {
		t.Errorf("no downFor in the log")
	} else if d, err := time.ParseDuration(m[1]); err != nil || d > outage+registries.DefaultLivenessInterval+time.Second ||
		d < outage-registries.DefaultLivenessInterval-time.Second {
		t.Errorf("downFor=%s (%v) for an outage of %s", m[1], err, outage.Round(time.Millisecond))
	}
	t.Logf("hung server: seen down after %s, up %s after it resumed (outage %s)",
		down.Round(time.Millisecond), up.Round(time.Millisecond), outage.Round(time.Millisecond))
	return down, up
}

var downForRE = regexp.MustCompile(`msg="Registry read succeeded again".* downFor=(\S+)`)

// RegistryUp is the value of meshbridge_registry_up{registry} (-1 when
// there is no such series).
func RegistryUp(t testing.TB, registry string) float64 {
	t.Helper()
	return RegistryGauge(t, "meshbridge_registry_up", registry)
}

// RegistryGauge is the value of the gauge name{registry} among the metrics
// every registry shares (registries.Collectors), -1 when there is no such
// series.
func RegistryGauge(t testing.TB, name, registry string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(registries.Collectors()...)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "registry" && l.GetValue() == registry {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
