package istiod

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/translate"
	"github.com/meshbridge/meshbridge/xds/gen"
)

// Config is one run's parameters.
type Config struct {
	IstiodBin      string
	InlineServices int // services in the inline mode (0: mode skipped)
	WEServices     int // services in the workloadentry mode (0: mode skipped)
	Instances      int
	Clients        int           // N churn clients
	Rounds         int           // counted changes per row
	Cap            time.Duration // istiod's cold sync gives up after this
	Dir            string        // logs and istiod's files
	Log            func(format string, args ...any)

	// Debounces are the quiet periods the fan-out per change is measured
	// at, each on both sides (meshbridge's debounce.after, which paces its
	// MCP push too, and istiod's PILOT_DEBOUNCE_AFTER); the first is also
	// the one of the cold sync and memory figures. At least one.
	Debounces []time.Duration
}

// result is one row: one system serving one mode at one quiet period.
// A row at Config.Debounces[0] has every figure; a row at a later quiet
// period has those of its churn rounds only (CPU, event → last, bytes).
type result struct {
	system              string
	mode                translate.EndpointMode
	services, instances int
	quiet               time.Duration // the debounce quiet period, both sides
	resync              time.Duration // later quiet periods, istiod: its restart → the cold-sync client done

	// Cold sync: from the serving process's start (meshbridge's for the
	// meshbridge row, istiod's for istiod's) and from meshbridge's start.
	coldDone           bool
	cold, coldFromMB   time.Duration
	ready              time.Duration // istiod: start → /ready
	coldHeld, coldFull int           // when not done: CLAs held, with every endpoint
	coldCPU, feedCPU   time.Duration // CPU of the serving process until done (and of the feeding meshbridge)

	rssSynced, rssClients, hwm uint64 // the serving process
	feedRSS                    uint64 // istiod row: the feeding meshbridge's RSS at the end

	rounds         int // counted rounds done
	roundErr       string
	cpu, cpuMean   time.Duration // serving process CPU per change, median and mean
	feedCPUChange  time.Duration // istiod row: meshbridge's CPU per change (MCP), median
	last, lastMax  time.Duration // event → last of N clients, median and max over rounds
	bytes, mcp     int64         // per change (mean): xDS to the N clients; MCP to istiod
	responses      float64       // EDS responses per client per change (mean)
	idle, feedIdle float64       // idle CPU rates subtracted
}

// run measures every mode: meshbridge direct, then istiod fed by meshbridge.
func run(ctx context.Context, tb testing.TB, cfg Config) ([]result, error) {
	var kube *harness.Kube
	var kubeconfig string
	var results []result
	for _, m := range []struct {
		mode     translate.EndpointMode
		services int
	}{{translate.EndpointsInline, cfg.InlineServices}, {translate.EndpointsWorkloadEntry, cfg.WEServices}} {
		if m.services == 0 {
			continue
		}
		bc := bridgeConfig{services: m.services, instances: cfg.Instances, endpoints: m.mode, debounce: cfg.Debounces[0]}
		cfg.Log("%s %d×%d: meshbridge direct", m.mode, m.services, cfg.Instances)
		rs, err := runDirect(ctx, cfg, bc)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("%s meshbridge: %w", m.mode, err)
		}
		if kube == nil {
			kube = harness.StartKube(tb)
			kubeconfig = kube.Kubeconfig(tb)
			if err := createNamespace(ctx, kube, "istio-system"); err != nil {
				return results, err
			}
		}
		cfg.Log("%s %d×%d: istiod fed over MCP", m.mode, m.services, cfg.Instances)
		bc.mcp = true
		rs, err = runIstiod(ctx, tb, cfg, bc, kubeconfig)
		results = append(results, rs...)
		if err != nil {
			return results, fmt.Errorf("%s istiod: %w", m.mode, err)
		}
	}
	return results, nil
}

func createNamespace(ctx context.Context, k *harness.Kube, name string) error {
	cs, err := kubernetes.NewForConfig(k.Config)
	if err != nil {
		return err
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	return err
}

// clusters returns the CLA names of the generated services.
func clusters(c bridgeConfig) ([]string, error) {
	opts := pipelineOptions(c)
	tr, err := translate.New(translate.Options{Registry: opts.Registry, HostTemplate: opts.HostTemplate,
		Namespace: pipeline.Namespace, Endpoints: c.endpoints})
	if err != nil {
		return nil, err
	}
	g := pipeline.NewGenerator(0, c.instances)
	names := make([]string, c.services)
	for i := range names {
		h, err := tr.Host(g.Service(i, 0).Service)
		if err != nil {
			return nil, err
		}
		names[i] = gen.ClusterName(pipeline.ServicePort, h)
	}
	return names, nil
}

// runDirect measures meshbridge serving the clients itself: the cold sync
// and memory at bc.debounce (cfg.Debounces[0]), then the churn rounds at
// each quiet period in turn, the same process set to it live (debounce.*
// applies on a reload; no restart needed).
func runDirect(ctx context.Context, cfg Config, bc bridgeConfig) ([]result, error) {
	r := result{system: "meshbridge", mode: bc.endpoints, services: bc.services, instances: bc.instances, quiet: bc.debounce}
	names, err := clusters(bc)
	if err != nil {
		return nil, err
	}
	b, err := startBridge(ctx, bc, filepath.Join(cfg.Dir, fmt.Sprintf("meshbridge-%s.log", bc.endpoints)))
	if err != nil {
		return nil, err
	}
	defer b.stop()
	cc, err := openCold(ctx, b.addr, names, bc.instances)
	if err != nil {
		return nil, err
	}
	defer cc.close()
	at, err := cc.wait(ctx, b.started.Add(30*time.Minute))
	if err != nil {
		return nil, err
	}
	if at.IsZero() {
		return nil, fmt.Errorf("meshbridge's cold sync not done after 30m")
	}
	r.coldDone, r.cold, r.coldFromMB = true, at.Sub(b.started), at.Sub(b.started)
	r.coldCPU, _ = procCPU(b.pid)
	r.rssSynced, _, _ = procMem(b.pid)
	cfg.Log("  cold sync %s (serving after %s), RSS %.0f MiB", r.cold, b.serving.Sub(b.started), pipeline.MiB(r.rssSynced))
	if err := churn(ctx, cfg, &r, b, b.addr, b.pid, 0, names[0]); err != nil {
		return nil, err
	}
	rs := []result{r}
	for _, q := range cfg.Debounces[1:] {
		r := result{system: "meshbridge", mode: bc.endpoints, services: bc.services, instances: bc.instances, quiet: q}
		if err := b.setDebounce(ctx, q); err != nil {
			return rs, err
		}
		cfg.Log("  debounce.after %s (set live)", q)
		if err := churn(ctx, cfg, &r, b, b.addr, b.pid, 0, names[0]); err != nil {
			return rs, err
		}
		rs = append(rs, r)
	}
	return rs, nil
}

// runIstiod measures istiod fed by one meshbridge over MCP: for each quiet
// period in turn, meshbridge's debounce.after set to it live (it paces the
// MCP push) and a fresh istiod started with PILOT_DEBOUNCE_AFTER at it
// (istiod reads it once, at its start), synced from that meshbridge, then
// the churn rounds. The cold sync and memory figures are those of the
// first quiet period's istiod.
func runIstiod(ctx context.Context, tb testing.TB, cfg Config, bc bridgeConfig, kubeconfig string) ([]result, error) {
	names, err := clusters(bc)
	if err != nil {
		return nil, err
	}
	b, err := startBridge(ctx, bc, filepath.Join(cfg.Dir, fmt.Sprintf("meshbridge-mcp-%s.log", bc.endpoints)))
	if err != nil {
		return nil, err
	}
	defer b.stop()
	var rs []result
	for i, q := range cfg.Debounces {
		r := result{system: "istiod", mode: bc.endpoints, services: bc.services, instances: bc.instances, quiet: q}
		if i > 0 {
			if !rs[0].coldDone {
				r.roundErr = rs[0].roundErr
				rs = append(rs, r)
				continue
			}
			if err := b.setDebounce(ctx, q); err != nil {
				return rs, err
			}
			cfg.Log("  debounce.after %s (set live) and a fresh istiod with PILOT_DEBOUNCE_AFTER=%s", q, q)
		}
		err := istiodAt(ctx, tb, cfg, bc, kubeconfig, b, names, &r, i == 0)
		rs = append(rs, r)
		if err != nil {
			return rs, err
		}
	}
	return rs, nil
}

// istiodAt runs one istiod at quiet period r.quiet, fed by b, until its
// churn rounds are done, and stops it. first: the row of the cold sync and
// memory figures; otherwise only the time istiod took to sync again
// (r.resync) is kept besides the churn's figures.
func istiodAt(ctx context.Context, tb testing.TB, cfg Config, bc bridgeConfig, kubeconfig string, b *bridgeProc,
	names []string, r *result, first bool) error {
	dir := filepath.Join(cfg.Dir, "istiod-"+string(bc.endpoints))
	if !first {
		dir += "-" + r.quiet.String()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ip, err := startIstiod(cfg.IstiodBin, kubeconfig, b.addr, dir, harness.FreePorts(tb, 3), r.quiet)
	if err != nil {
		return err
	}
	defer ip.stop()
	deadline := ip.started.Add(cfg.Cap)
	if err := ip.waitReady(ctx, cfg.Cap); err != nil {
		return err
	}
	ready := time.Since(ip.started)
	cfg.Log("  istiod ready after %s", ready)
	cc, err := openCold(ctx, ip.grpcAddr, names, bc.instances)
	if err != nil {
		return err
	}
	defer cc.close()
	at, err := cc.wait(ctx, deadline)
	if err != nil {
		return fmt.Errorf("%w\n%s", err, ip.logTail(20))
	}
	if !first {
		if at.IsZero() {
			held, full := cc.progress()
			r.roundErr = fmt.Sprintf("not measured: istiod's sync not done after %s (%d of %d CLAs held, %d complete)",
				cfg.Cap, held, len(names), full)
			cfg.Log("  %s", r.roundErr)
			return nil
		}
		r.resync = at.Sub(ip.started)
		cfg.Log("  synced %s after istiod's start", r.resync)
	} else {
		r.ready = ready
		r.coldCPU, _ = procCPU(ip.pid)
		r.feedCPU, _ = procCPU(b.pid)
		r.rssSynced, _, _ = procMem(ip.pid)
		if at.IsZero() {
			r.coldHeld, r.coldFull = cc.progress()
			r.cold = cfg.Cap
			cfg.Log("  cold sync not done after %s: %d of %d CLAs held, %d with all %d endpoints", cfg.Cap, r.coldHeld,
				len(names), r.coldFull, bc.instances)
			r.roundErr = "not measured: cold sync not done"
			r.rssClients, r.hwm, _ = procMem(ip.pid)
			r.feedRSS, _, _ = procMem(b.pid)
			return nil
		}
		r.coldDone, r.cold, r.coldFromMB = true, at.Sub(ip.started), at.Sub(b.started)
		cfg.Log("  cold sync %s from istiod start (%s from meshbridge start), RSS %.0f MiB", r.cold, r.coldFromMB,
			pipeline.MiB(r.rssSynced))
	}
	if err := churn(ctx, cfg, r, b, ip.grpcAddr, ip.pid, b.pid, names[0]); err != nil {
		return fmt.Errorf("%w\n%s", err, ip.logTail(20))
	}
	if first {
		r.feedRSS, _, _ = procMem(b.pid)
	}
	return nil
}

// churn connects the N clients to addr (pid serves them; feeder, when not
// 0, is the meshbridge feeding it over MCP), then changes one instance of
// service 0 per round: 2 warm-up rounds, then cfg.Rounds counted.
func churn(ctx context.Context, cfg Config, r *result, b *bridgeProc, addr string, pid, feeder int, cluster string) error {
	f, err := connectFanout(ctx, addr, cfg.Clients, cluster, 5*time.Minute)
	if err != nil {
		return err
	}
	defer f.close()
	// Idle rates: keepalives and timers, subtracted from each round's CPU
	// (a measurement window, not a wait for anything).
	idle := func(p int) float64 {
		if p == 0 {
			return 0
		}
		c0, t0 := mustCPU(p), time.Now()
		time.Sleep(2 * time.Second)
		return float64(mustCPU(p)-c0) / float64(time.Since(t0))
	}
	r.idle, r.feedIdle = idle(pid), idle(feeder)
	const warmup = 2
	var cpus, feeds, lasts []time.Duration
	var bytes, mcp, responses int64
	for round := range warmup + cfg.Rounds {
		f.reset()
		var m0 int64
		if feeder != 0 {
			if m0, err = b.mcpBytes(ctx); err != nil {
				return err
			}
		}
		t0, c0, fc0 := time.Now(), mustCPU(pid), cpuOr0(feeder)
		event, err := b.change(ctx, 0)
		if err != nil {
			return err
		}
		if got, err := f.await(ctx, event.Add(time.Minute)); err != nil {
			r.roundErr = fmt.Sprintf("round %d: %d of %d clients received the change within 1m", round, got, cfg.Clients)
			cfg.Log("  %s", r.roundErr)
			break
		}
		// A quiet window catches late and duplicate sends and the work
		// after the last send, before counting.
		time.Sleep(300 * time.Millisecond)
		wall := time.Since(t0)
		c1, fc1 := mustCPU(pid), cpuOr0(feeder)
		last, k, n := f.sums()
		if round < warmup {
			continue
		}
		cpus = append(cpus, c1-c0-time.Duration(r.idle*float64(wall)))
		if feeder != 0 {
			feeds = append(feeds, fc1-fc0-time.Duration(r.feedIdle*float64(wall)))
			m1, err := b.mcpBytes(ctx)
			if err != nil {
				return err
			}
			mcp += m1 - m0
		}
		lasts = append(lasts, time.Duration(last-event.UnixNano()))
		bytes += n
		responses += k
		r.rounds++
	}
	r.rssClients, r.hwm, _ = procMem(pid)
	if r.rounds == 0 {
		return nil
	}
	r.cpu, r.cpuMean = median(cpus), mean(cpus)
	if feeder != 0 {
		r.feedCPUChange = median(feeds)
	}
	r.last = median(lasts)
	r.lastMax = slices.Max(lasts)
	r.bytes, r.mcp = bytes/int64(r.rounds), mcp/int64(r.rounds)
	r.responses = float64(responses) / float64(r.rounds*cfg.Clients)
	cfg.Log("  per change at quiet period %s: CPU %s (mean %s), event→last of %d %s (max %s), %d B xDS (%.2f responses per client), %d B MCP; RSS %.0f MiB",
		r.quiet, r.cpu, r.cpuMean, cfg.Clients, r.last, r.lastMax, r.bytes, r.responses, r.mcp, pipeline.MiB(r.rssClients))
	return nil
}

func mustCPU(pid int) time.Duration {
	d, err := procCPU(pid)
	if err != nil {
		panic(err)
	}
	return d
}

func cpuOr0(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	return mustCPU(pid)
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func mean(d []time.Duration) time.Duration {
	var sum time.Duration
	for _, x := range d {
		sum += x
	}
	return sum / time.Duration(len(d))
}
