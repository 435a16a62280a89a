package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"github.com/hashicorp/consul/api"
	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/meshbridge/meshbridge/registries/nacos"
	"github.com/meshbridge/meshbridge/test/harness"
)

// BenchmarkRegistrationToFirstCall measures, per iteration, the time from
// the registration of a healthy instance to the first successful call of a
// proxyless gRPC client already waiting for it (WaitForReady), through
// meshbridge, with the default 100ms debounce and with a 1ms one (what the
// pipeline costs besides the debounce's quiet period). Registries:
//
//   - consul: a new service, registered passing (the agent's HTTP API); the
//     bridge's blocking query on the catalog returns at once.
//   - nacos: the first instance of a service the bridge already follows,
//     registered as an application does: nacos-sdk-go v2.3.5's naming
//     client over gRPC (ephemeral, healthy), on the Nacos server. Each
//     service was created before the bridge started with only a disabled
//     instance (not usable, never emitted), so the bridge has listed and
//     subscribed it and the server's push carries the registration.
//   - nacos-new-service: a service that did not exist (same client): Nacos
//     2.x has no watch on the service list, so the bridge finds it at its
//     next listing (relistInterval, default 10s; registries/nacos doc.go
//     rule 3). Default debounce only: the listing dominates.
//   - zookeeper: a new Dubbo interface: its Triple provider URL (pointing at
//     the echo backend) created as an ephemeral node under
//     /dubbo/<interface>/providers in a real ZooKeeper, as a provider
//     registers; the bridge's watch on /dubbo fires, it reads the new
//     interface's providers.
//
// Where the registration waits on a periodic refresh (the bridge's
// listing), the runs register at evenly spread points of that
// cycle (registrationSource.period), so the median and maximum are those of
// a registration at a random moment.
//
// Each client is started before the registration and the registration waits
// until the bridge logged the client's first xDS request ("Connected xDS
// client": its LDS subscription). Reported: median and max of
// registration → first call, and the parts of it per run (medians, and the
// bridge's max): registry-ms, from the register call to the registry's
// delivery of the snapshot (Snapshot.Observed, when the push or read
// arrived: /debug/registryz lastEvent); bridge-ms, from Observed to the last
// xDS push before the first call (the bridge's "Pushed full|eds" debug log
// line, millisecond resolution); client-ms, from that push to the first
// successful call.
//
//	go test ./test/e2e -run '^$' -bench RegistrationToFirstCall -benchtime 20x
//	go test ./test/e2e -run '^$' -bench 'RegistrationToFirstCall/^nacos$' -benchtime 20x
//	go test ./test/e2e -run '^$' -bench 'RegistrationToFirstCall/nacos-new-service' -benchtime 20x
//	go test ./test/e2e -run '^$' -bench 'RegistrationToFirstCall/zookeeper' -benchtime 20x
func BenchmarkRegistrationToFirstCall(b *testing.B) {
	for _, src := range []struct {
		name      string
		debounces []string
		start     func(b *testing.B, port int) registrationSource
	}{
		{"consul", []string{"100ms", "1ms"}, startConsulSource},
		{"nacos", []string{"100ms", "1ms"}, func(b *testing.B, port int) registrationSource {
			return startNacosSource(b, port, true)
		}},
		{"nacos-new-service", []string{"100ms"}, func(b *testing.B, port int) registrationSource {
			return startNacosSource(b, port, false)
		}},
		{"zookeeper", []string{"100ms", "1ms"}, startZooKeeperSource},
	} {
		b.Run(src.name, func(b *testing.B) {
			for _, after := range src.debounces {
				b.Run("debounce="+after, func(b *testing.B) {
					benchmarkRegistrationToFirstCall(b, src.start, fmt.Sprintf("debounce: {after: %s}\n", after))
				})
			}
		})
	}
}

// registrationSource is a registry the benchmark registers services in,
// service i for iteration i, each with one instance at 127.0.0.1:port.
type registrationSource struct {
	// registry is the registry's name in the bridge's configuration, as
	// /debug/registryz shows it.
	registry string
	// config is the bridge's registries block.
	config string
	// known is how many services (0 to known-1) exist before the bridge
	// starts: the benchmark waits until the bridge has read them all.
	known int
	// period is the refresh cycle a registration waits on, when there is
	// one: the bridge's listing of new services. Run i registers period × i / b.N after its client
	// subscribed, outside the timer, so that the runs sample that cycle
	// evenly: without it each run would end a fixed time after a refresh
	// and register at the same point of the cycle as the last one.
	period time.Duration
	// host returns service i's mesh host.
	host func(i int) string
	// register registers service i's instance, healthy.
	register func(i int)
}

func startConsulSource(b *testing.B, port int) registrationSource {
	consul := harness.StartConsul(b)
	return registrationSource{
		registry: "consul-e2e",
		config:   consulRegistry(consul),
		host:     func(i int) string { return fmt.Sprintf("svc-%d.service.consul", i) },
		register: func(i int) {
			name := fmt.Sprintf("svc-%d", i)
			consul.RegisterInstance(b, name, name+"-1", "127.0.0.1", port, nil, grpcMeta, api.HealthPassing)
		},
	}
}

// startNacosSource starts the Nacos server and a nacos-sdk-go naming
// client (an application). With known, services 0 to b.N-1 are created
// first, each with a disabled ephemeral instance on another address (over
// the harness's HTTP API, which beats it), and listed by the server before
// the bridge starts.
func startNacosSource(b *testing.B, port int, known bool) registrationSource {
	nacosServer := harness.StartNacos(b)
	name := func(i int) string { return fmt.Sprintf("svc-%d", i) }
	src := registrationSource{
		registry: "nacos-e2e",
		config: fmt.Sprintf("registries:\n- name: nacos-e2e\n  type: nacos\n  nacos: {addresses: [%q]}\n",
			nacosServer.Address()),
		host: func(i int) string { return name(i) + ".default-group.public.nacos" },
	}
	if known {
		for i := range b.N {
			nacosServer.RegisterInstance(b, "", "", name(i), "127.0.0.2", port, 1, grpcMeta, true, true, false)
		}
		harness.EventuallyTrue(b, 30*time.Second, "the server lists every service", func() bool {
			return len(nacosServer.ListServices(b, "", "")) == b.N
		})
		src.known = b.N
	} else {
		src.period = nacos.DefaultRelistInterval
	}
	dir := b.TempDir()
	app, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig: &constant.ClientConfig{
			TimeoutMs: 5000, NotLoadCacheAtStart: true, CacheDir: dir, LogDir: dir, LogLevel: "error",
		},
		ServerConfigs: []constant.ServerConfig{{IpAddr: "127.0.0.1", Port: uint64(nacosServer.HTTPPort())}},
	})
	if err != nil {
		b.Fatalf("nacos naming client: %v", err)
	}
	b.Cleanup(app.CloseClient)
	src.register = func(i int) {
		// A register the server refuses because it has not registered the
		// client's connection yet is tried again.
		harness.Eventually(b, 30*time.Second, "register "+name(i), func() error {
			ok, err := app.RegisterInstance(vo.RegisterInstanceParam{
				Ip: "127.0.0.1", Port: uint64(port), ServiceName: name(i), Weight: 1,
				Enable: true, Healthy: true, Ephemeral: true, Metadata: grpcMeta,
			})
			if err != nil || !ok {
				return fmt.Errorf("ok=%v err=%v", ok, err)
			}
			return nil
		})
	}
	return src
}

// startZooKeeperSource starts ZooKeeper; service i is the Dubbo interface
// com.bench.Svc<i>, registered by creating its provider node.
func startZooKeeperSource(b *testing.B, port int) registrationSource {
	z := harness.StartZooKeeper(b)
	conn := z.Client(b)
	iface := func(i int) string { return fmt.Sprintf("com.bench.Svc%d", i) }
	return registrationSource{
		registry: "zk-dubbo",
		config:   zookeeperRegistry(z),
		host:     func(i int) string { return strings.ToLower(iface(i)) + ".dubbo" },
		register: func(i int) {
			u := fmt.Sprintf("tri://127.0.0.1:%d/%s?interface=%s&side=provider&methods=Whoami&application=bench", port, iface(i), iface(i))
			harness.CreatePath(b, conn, "/dubbo/"+iface(i)+"/providers/"+url.QueryEscape(u), nil, zk.FlagEphemeral)
		},
	}
}

func benchmarkRegistrationToFirstCall(b *testing.B, start func(b *testing.B, port int) registrationSource, extraConfig string) {
	port := startBackend(b, "backend")
	src := start(b, port)
	br := startBridge(b, src.config+extraConfig)
	if src.known > 0 {
		eventually(b, 30*time.Second, "the bridge read every service", func() error {
			if n := br.registryStatus(src.registry).Services; n != src.known {
				return fmt.Errorf("%d of %d services", n, src.known)
			}
			return nil
		})
	}
	var total, registry, bridge, client []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		from := logSize(b, br.proc.log)
		c := startClient(b, br.xdsAddr, fmt.Sprintf("xds:///%s:%d", src.host(i), port), "-wait-for-ready", "-timeout", "60s")
		eventually(b, 30*time.Second, "the client's xDS subscription", func() error {
			if len(logLines(b, br.proc.log, from, `msg="Connected xDS client"`)) == 0 {
				return fmt.Errorf("no new xDS client in the bridge's log")
			}
			return nil
		})
		time.Sleep(src.period * time.Duration(i) / time.Duration(b.N)) // the phase in the cycle: see period
		b.StartTimer()
		registered := time.Now()
		src.register(i)
		first := c.firstSuccess(b, 60*time.Second)
		b.StopTimer()
		total = append(total, first.Sub(registered))
		if observed, pushed, ok := br.pushAfterEvent(src.registry, first); ok {
			registry = append(registry, observed.Sub(registered))
			bridge = append(bridge, pushed.Sub(observed))
			client = append(client, first.Sub(pushed))
		}
		c.stop()
	}
	b.ReportMetric(ms(median(total)), "median-ms")
	b.ReportMetric(ms(slices.Max(total)), "max-ms")
	if len(bridge) > 0 {
		b.ReportMetric(ms(median(registry)), "registry-ms")
		b.ReportMetric(ms(median(bridge)), "bridge-ms")
		b.ReportMetric(ms(slices.Max(bridge)), "bridge-max-ms")
		b.ReportMetric(ms(median(client)), "client-ms")
	}
	b.Logf("registration → first call over %d runs: median %s, max %s; parts over %d runs (median, min–max): "+
		"register → Observed %s (%s–%s), Observed → xDS push %s (%s–%s), push → first call %s (%s–%s)",
		len(total), median(total), slices.Max(total), len(bridge),
		median(registry), minOrZero(registry), maxOrZero(registry),
		median(bridge), minOrZero(bridge), maxOrZero(bridge),
		median(client), minOrZero(client), maxOrZero(client))
}

// pushAfterEvent returns the Observed time of the registry's last snapshot
// (/debug/registryz lastEvent) and the time of the bridge's last xDS push
// ("Pushed full|eds" log line) between it and before. The push logs its line
// as it hands the resources to the caches, before the client's round trips
// to the first call, so the line is there when this reads it. ok is false
// when there is none: the last snapshot came after that push (a read that
// changed nothing served).
func (b *bridge) pushAfterEvent(registry string, before time.Time) (observed, pushed time.Time, ok bool) {
	observed = b.registryStatus(registry).LastEvent
	if observed.IsZero() || observed.After(before) {
		return observed, pushed, false
	}
	for _, l := range logLines(b.t, b.proc.log, 0, `msg="Pushed `) {
		at, err := logTime(l)
		// The log's millisecond resolution truncates: a push at Observed +
		// δ may read up to 1 ms earlier.
		if err == nil && !at.Before(observed.Truncate(time.Millisecond)) && !at.After(before) {
			pushed, ok = at, true
		}
	}
	if pushed.Before(observed) {
		pushed = observed
	}
	return observed, pushed, ok
}

// registryStatus is the part of a registry's /debug/registryz entry the
// benchmark reads.
type registryStatus struct {
	Name      string    `json:"name"`
	LastEvent time.Time `json:"lastEvent"`
	Services  int       `json:"services"`
}

func (b *bridge) registryStatus(name string) registryStatus {
	b.t.Helper()
	var regs []registryStatus
	if err := json.Unmarshal([]byte(b.get("/debug/registryz")), &regs); err != nil {
		b.t.Fatalf("/debug/registryz: %v", err)
	}
	for _, r := range regs {
		if r.Name == name {
			return r
		}
	}
	b.t.Fatalf("/debug/registryz has no registry %q", name)
	return registryStatus{}
}

// logSize returns the size of a process's log file: an offset for logLines.
func logSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// logLines returns the lines of a log file from offset that contain substr.
func logLines(t testing.TB, path string, offset int64, substr string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var out []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			out = append(out, sc.Text())
		}
	}
	return out
}

// logTime reads the time of a text-format slog line ("time=... level=...").
func logTime(line string) (time.Time, error) {
	v, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
	return time.Parse(time.RFC3339, v)
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(ds))
	return s[len(s)/2]
}

func minOrZero(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Min(ds)
}

func maxOrZero(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	return slices.Max(ds)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
