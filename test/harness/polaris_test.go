package harness

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/model"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"
)

// polarisWait bounds waits for a write to show in Polaris's reads, which it
// serves from a cache refreshed every second.
const polarisWait = 15 * time.Second

// TestPolarisRegisterListRestart: the server listens on 127.0.0.1 only, on
// the ports it reports; instances registered over the Nacos HTTP API are
// listed back with their values, in the default and in a new namespace;
// deregistered ones go; Restart comes back on the same ports with an empty
// store; Stop ends the process.
func TestPolarisRegisterListRestart(t *testing.T) {
	p := StartPolaris(t)
	ports := p.Ports()
	want := []int{ports.Eureka, ports.HTTP, ports.ServiceGRPC, ports.ConfigGRPC, ports.XDS, ports.NacosHTTP, p.NacosGRPCPort()}
	assertListeners(t, p.Pid(), want)
	if p.NacosAddress() != "127.0.0.1:"+strconv.Itoa(ports.NacosHTTP) || p.NacosGRPCPort() != ports.NacosHTTP+1000 {
		t.Fatalf("NacosAddress %s, NacosGRPCPort %d for ports %+v", p.NacosAddress(), p.NacosGRPCPort(), ports)
	}

	meta := map[string]string{"protocol": "grpc", "version": "v1"}
	p.RegisterInstance(t, "", "", "orders", "10.0.0.1", 8080, 2, meta, true, true, true)
	p.RegisterInstance(t, "", "", "orders", "10.0.0.2", 8080, 1, nil, false, false, true)
	p.RegisterInstance(t, "", "", "orders", "10.0.0.3", 8080, 1, nil, true, true, false)
	p.RegisterInstance(t, "team-a", "billing", "invoices", "10.0.1.1", 9090, 1, nil, true, true, true)

	Eventually(t, polarisWait, "services listed", func() error {
		if got := p.ListServices(t, "", ""); !slices.Contains(got, "orders") {
			return fmt.Errorf("public/DEFAULT_GROUP: %v", got)
		}
		if got := p.ListServices(t, "team-a", "billing"); !slices.Equal(got, []string{"invoices"}) {
			return fmt.Errorf("team-a/billing: %v", got)
		}
		return nil
	})
	Eventually(t, polarisWait, "instances listed", func() error {
		got := instanceSummary(p.ListInstances(t, "public", "DEFAULT_GROUP", "orders"))
		// 10.0.0.3 is disabled: Nacos clients' lists leave it out.
		want := []string{"10.0.0.1:8080 w=2 healthy protocol=grpc version=v1", "10.0.0.2:8080 w=1 unhealthy"}
		if !slices.Equal(got, want) {
			return fmt.Errorf("orders: %v, want %v", got, want)
		}
		if got := instanceSummary(p.ListInstances(t, "team-a", "billing", "invoices")); !slices.Equal(got, []string{"10.0.1.1:9090 w=1 healthy"}) {
			return fmt.Errorf("team-a/billing/invoices: %v", got)
		}
		return nil
	})

	// A register again overwrites the instance's values.
	p.RegisterInstance(t, "", "", "orders", "10.0.0.2", 8080, 5, map[string]string{"zone": "b"}, false, true, true)
	Eventually(t, polarisWait, "instance overwritten", func() error {
		got := instanceSummary(p.ListInstances(t, "", "", "orders"))
		if !slices.Contains(got, "10.0.0.2:8080 w=5 healthy zone=b") {
			return fmt.Errorf("orders: %v", got)
		}
		return nil
	})

	p.DeregisterInstance(t, "", "", "orders", "10.0.0.1", 8080)
	p.DeregisterInstance(t, "team-a", "billing", "invoices", "10.0.1.1", 9090)
	p.DeregisterInstance(t, "", "", "orders", "10.9.9.9", 1) // unknown: succeeds
	Eventually(t, polarisWait, "instances deregistered", func() error {
		if got := instanceSummary(p.ListInstances(t, "", "", "orders")); !slices.Equal(got, []string{"10.0.0.2:8080 w=5 healthy zone=b"}) {
			return fmt.Errorf("orders: %v", got)
		}
		if got := p.ListInstances(t, "team-a", "billing", "invoices"); len(got) != 0 {
			return fmt.Errorf("team-a/billing/invoices: %v", instanceSummary(got))
		}
		return nil
	})
	// The service stays listed without instances.
	if got := p.ListServices(t, "team-a", "billing"); !slices.Equal(got, []string{"invoices"}) {
		t.Fatalf("team-a/billing after its last instance went: %v", got)
	}

	oldPid := p.Pid()
	p.Restart(t)
	if p.Pid() == oldPid || p.Pid() == 0 {
		t.Fatalf("pid after restart %d, before %d", p.Pid(), oldPid)
	}
	if p.Ports() != ports {
		t.Fatalf("ports after restart %+v, before %+v", p.Ports(), ports)
	}
	if got := p.ListServices(t, "", ""); slices.Contains(got, "orders") {
		t.Fatalf("services after restart: %v, want an empty store", got)
	}
	if got := p.ListInstances(t, "", "", "orders"); len(got) != 0 {
		t.Fatalf("orders after restart: %v, want an empty store", instanceSummary(got))
	}
	p.RegisterInstance(t, "", "", "orders", "10.0.0.7", 8080, 1, nil, true, true, true)
	Eventually(t, polarisWait, "instance registered after restart", func() error {
		if got := instanceSummary(p.ListInstances(t, "", "", "orders")); !slices.Equal(got, []string{"10.0.0.7:8080 w=1 healthy"}) {
			return fmt.Errorf("orders: %v", got)
		}
		return nil
	})

	pid := p.Pid()
	p.Stop()
	if p.Pid() != 0 {
		t.Fatalf("Pid after Stop: %d", p.Pid())
	}
	if processExists(pid) {
		t.Fatalf("process %d still exists after Stop", pid)
	}
	p.Stop() // a no-op
}

// TestPolarisDeregisterAgedInstance: DeregisterInstance removes an instance
// whose registration is older than Polaris's 5 s cache window, where a plain
// Nacos deregister goes unseen.
func TestPolarisDeregisterAgedInstance(t *testing.T) {
	p := StartPolaris(t)
	p.RegisterInstance(t, "", "", "aged", "10.0.0.1", 8080, 1, nil, true, true, true)
	Eventually(t, polarisWait, "instance listed", func() error {
		if got := p.ListInstances(t, "", "", "aged"); len(got) != 1 {
			return fmt.Errorf("aged: %v", instanceSummary(got))
		}
		return nil
	})
	// Not a synchronisation: the instance must be older than the window.
	time.Sleep(7 * time.Second)
	p.DeregisterInstance(t, "", "", "aged", "10.0.0.1", 8080)
	Eventually(t, polarisWait, "aged instance deregistered", func() error {
		if got := p.ListInstances(t, "", "", "aged"); len(got) != 0 {
			return fmt.Errorf("aged: %v", instanceSummary(got))
		}
		return nil
	})
}

// TestPolarisNacosSDK: the nacos-sdk-go v2 naming client, given only the
// Nacos HTTP address (it derives the gRPC port), subscribes to a service and
// receives its instances registered over HTTP, and their changes; an
// instance it registers itself is listed over HTTP and goes when the client
// closes.
func TestPolarisNacosSDK(t *testing.T) {
	p := StartPolaris(t)
	p.RegisterInstance(t, "", "", "catalog", "10.0.0.1", 8080, 1, map[string]string{"protocol": "grpc"}, true, true, true)

	client := newNacosNamingClient(t, p)
	var mu sync.Mutex
	var last []model.Instance
	var calls int
	err := client.Subscribe(&vo.SubscribeParam{
		ServiceName: "catalog",
		GroupName:   "DEFAULT_GROUP",
		SubscribeCallback: func(instances []model.Instance, err error) {
			mu.Lock()
			defer mu.Unlock()
			last, calls = slices.Clone(instances), calls+1
		},
	})
	if err != nil {
		t.Fatalf("subscribe: %v", err)
	}
	pushed := func(want ...string) func() error {
		return func() error {
			mu.Lock()
			defer mu.Unlock()
			var got []string
			for _, i := range last {
				got = append(got, fmt.Sprintf("%s:%d healthy=%t protocol=%s", i.Ip, i.Port, i.Healthy, i.Metadata["protocol"]))
			}
			sort.Strings(got)
			if !slices.Equal(got, want) {
				return fmt.Errorf("after %d callbacks: %v, want %v", calls, got, want)
			}
			return nil
		}
	}
	Eventually(t, polarisWait, "subscription delivers the instance", pushed("10.0.0.1:8080 healthy=true protocol=grpc"))

	p.RegisterInstance(t, "", "", "catalog", "10.0.0.2", 8080, 1, nil, true, false, true)
	Eventually(t, polarisWait, "subscription delivers a second instance", pushed(
		"10.0.0.1:8080 healthy=true protocol=grpc", "10.0.0.2:8080 healthy=false protocol="))
	p.DeregisterInstance(t, "", "", "catalog", "10.0.0.1", 8080)
	Eventually(t, polarisWait, "subscription delivers the removal", pushed("10.0.0.2:8080 healthy=false protocol="))

	reg := vo.RegisterInstanceParam{
		Ip: "10.0.0.9", Port: 9000, ServiceName: "from-sdk", GroupName: "g1",
		Weight: 1, Enable: true, Healthy: true, Ephemeral: true, Metadata: map[string]string{"k": "v"},
	}
	ok, err := client.RegisterInstance(reg)
	if err != nil || !ok {
		t.Fatalf("sdk register: %v, %v", ok, err)
	}
	Eventually(t, polarisWait, "sdk instance listed over HTTP", func() error {
		if got := instanceSummary(p.ListInstances(t, "", "g1", "from-sdk")); !slices.Equal(got, []string{"10.0.0.9:9000 w=1 healthy k=v"}) {
			return fmt.Errorf("g1/from-sdk: %v", got)
		}
		return nil
	})
	// Polaris sees a disconnect's removal only of an instance written in the
	// last 5 s: register it again, unchanged, just before closing.
	if ok, err := client.RegisterInstance(reg); err != nil || !ok {
		t.Fatalf("sdk register again: %v, %v", ok, err)
	}
	client.CloseClient()
	Eventually(t, polarisWait, "sdk instance gone with its client", func() error {
		if got := p.ListInstances(t, "", "g1", "from-sdk"); len(got) != 0 {
			return fmt.Errorf("g1/from-sdk: %v", instanceSummary(got))
		}
		return nil
	})
}

// newNacosNamingClient is a nacos-sdk-go naming client of p's default
// namespace, configured with the Nacos HTTP address only, its logs and cache
// in t.TempDir().
func newNacosNamingClient(t *testing.T, p *Polaris) naming_client.INamingClient {
	t.Helper()
	dir := t.TempDir()
	host, port, err := net.SplitHostPort(p.NacosAddress())
	if err != nil {
		t.Fatal(err)
	}
	portNum, _ := strconv.ParseUint(port, 10, 64)
	cc := constant.NewClientConfig(
		constant.WithTimeoutMs(5000),
		constant.WithNotLoadCacheAtStart(true),
		constant.WithLogDir(filepath.Join(dir, "log")),
		constant.WithCacheDir(filepath.Join(dir, "cache")),
		constant.WithLogLevel("warn"),
	)
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  cc,
		ServerConfigs: []constant.ServerConfig{*constant.NewServerConfig(host, portNum)},
	})
	if err != nil {
		t.Fatalf("nacos naming client: %v", err)
	}
	return client
}

// instanceSummary renders instances as sorted "ip:port w=W healthy|unhealthy
// k=v ..." lines, without Polaris's internal metadata keys.
func instanceSummary(instances []NacosInstance) []string {
	var out []string
	for _, i := range instances {
		s := fmt.Sprintf("%s:%d w=%g %s", i.IP, i.Port, i.Weight, map[bool]string{true: "healthy", false: "unhealthy"}[i.Healthy])
		var keys []string
		for k := range i.Metadata {
			if !strings.HasPrefix(k, "internal-nacos-") {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			s += " " + k + "=" + i.Metadata[k]
		}
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// listenWait bounds how long a server that answers its readiness check may
// take to open the rest of its listeners: readiness probes some ports only
// (Polaris: its Nacos HTTP and gRPC ports), and a server opens the others on
// goroutines or threads of their own, later on a busy machine.
const listenWait = 30 * time.Second

// assertListeners checks that process pid listens on TCP exactly on
// 127.0.0.1 at ports (any order), and nowhere else: every port comes within
// listenWait, and a listener at any other address fails at once, since a
// server opening its listeners never opens one there, not even for a moment.
func assertListeners(t *testing.T, pid int, ports []int) {
	t.Helper()
	var want []string
	for _, p := range ports {
		want = append(want, "127.0.0.1:"+strconv.Itoa(p))
	}
	sort.Strings(want)
	Eventually(t, listenWait, fmt.Sprintf("process %d listening on %v", pid, want), func() error {
		got, err := tcpListeners(pid)
		if err != nil {
			t.Fatalf("listeners of %d: %v", pid, err)
		}
		sort.Strings(got)
		for _, a := range got {
			if !slices.Contains(want, a) {
				t.Fatalf("process %d listens on %v, want %v: %s is not one of its ports", pid, got, want, a)
			}
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("process %d listens on %v, want %v", pid, got, want)
		}
		return nil
	})
}

// processExists reports whether process pid exists (signal 0 reaches it).
func processExists(pid int) bool {
	proc, err := os.FindProcess(pid)
	return err == nil && proc.Signal(syscall.Signal(0)) == nil
}
