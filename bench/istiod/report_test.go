package istiod

import (
	"strings"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/translate"
)

func TestParseDebounces(t *testing.T) {
	got, err := parseDebounces("100ms, 10ms")
	if err != nil || len(got) != 2 || got[0] != 100*time.Millisecond || got[1] != 10*time.Millisecond {
		t.Fatalf("parseDebounces = %v, %v", got, err)
	}
	for _, bad := range []string{"", "10ms,10ms", "-1ms", "10"} {
		if _, err := parseDebounces(bad); err == nil {
			t.Errorf("parseDebounces(%q): no error", bad)
		}
	}
}

func TestBridgeConfigEnv(t *testing.T) {
	c := bridgeConfig{services: 3, instances: 2, endpoints: translate.EndpointsWorkloadEntry, mcp: true, debounce: 10 * time.Millisecond}
	got, err := parseBridgeConfig(c.env())
	if err != nil || got != c {
		t.Fatalf("parseBridgeConfig(%q) = %+v, %v; want %+v", c.env(), got, err, c)
	}
}

// TestRenderQuietPeriods: the first quiet period's rows make the Ratios and
// Results tables; every quiet period gets a ratio of event → last and the
// target's verdict.
func TestRenderQuietPeriods(t *testing.T) {
	ms := time.Millisecond
	row := func(system string, q, last time.Duration) result {
		return result{system: system, mode: translate.EndpointsInline, services: 10, instances: 2, quiet: q,
			coldDone: true, cold: time.Second, rounds: 3, cpu: 5 * ms, last: last, lastMax: last}
	}
	cfg := Config{Clients: 1000, Rounds: 3, Instances: 2, Cap: time.Minute, Debounces: []time.Duration{100 * ms, 10 * ms}}
	rs := []result{row("meshbridge", 100*ms, 130*ms), row("meshbridge", 10*ms, 20*ms),
		row("istiod", 100*ms, 260*ms), row("istiod", 10*ms, 80*ms)}
	rs[3].resync = 2 * time.Second
	md := render(cfg, rs, machineInfo{})
	for _, want := range []string{
		"| 100ms (default) | `inline` | 130.0 ms | 260.0 ms | 2.00× | not met |",
		"| 10ms | `inline` | 20.0 ms | 80.0 ms | 4.00× | met |",
		"Target: istiod ÷ meshbridge ≥ 3× in both modes",
		"| 10ms | istiod (MCP from meshbridge) | `inline` |",
		"`inline` at 10ms 2.00 s",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	results, _ := section(md, "## Results")
	if strings.Count(results, "| meshbridge (direct xDS) |") != 1 || strings.Count(results, "| istiod (MCP from meshbridge) |") != 1 {
		t.Errorf("Results table: want the first quiet period's rows only:\n%s", results)
	}
}

// section returns the body of md's level-2 section heading, up to the next.
func section(md, heading string) (string, bool) {
	_, rest, ok := strings.Cut(md, "\n"+heading+"\n")
	if i := strings.Index(rest, "\n## "); i >= 0 {
		rest = rest[:i]
	}
	return rest, ok
}
