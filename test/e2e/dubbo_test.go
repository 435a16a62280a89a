package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/test/harness"
)

// Dubbo hosts of the test provider's GreetService (README "Naming
// conventions").
const (
	greetIface  = "org.apache.dubbo.demo.GreetService"
	greetMethod = "/" + greetIface + "/Greet"
	greetHost   = "org.apache.dubbo.demo.greetservice.dubbo"
)

// zookeeperRegistry is the registries block of one zookeeper registry on z.
func zookeeperRegistry(z *harness.ZooKeeper) string {
	return fmt.Sprintf("registries:\n- name: zk-dubbo\n  type: zookeeper\n  zookeeper: {servers: [%q], sessionTimeout: 4s}\n",
		z.Address())
}

// greeting is the test provider's answer to Greet("meshbridge").
func greeting(p *harness.DubboProvider) string {
	return "hello meshbridge from " + p.Options().App + "@" + p.TriAddress()
}

// servedObject is one object of /debug/configz.
type servedObject struct {
	Kind        string            `json:"kind"`
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
	Spec        json.RawMessage   `json:"spec"`
}

// servedObjects returns what the bridge serves, by kind and name.
func servedObjects(b *bridge) (map[string]servedObject, error) {
	var objs []servedObject
	if err := json.Unmarshal([]byte(b.get("/debug/configz")), &objs); err != nil {
		return nil, err
	}
	out := make(map[string]servedObject, len(objs))
	for _, o := range objs {
		out[o.Kind+"/"+o.Name] = o
	}
	return out, nil
}

// TestDubboProviderInZooKeeperThroughMeshbridge: a real dubbo-go provider
// (Triple, registered at interface and application level in a real
// ZooKeeper) is called through meshbridge by the proxyless grpc-go client,
// at its interface-level and its application-level host; a second provider
// is a second endpoint; a stopped provider's endpoint leaves (the
// application level at once, the interface level with its ZooKeeper
// session); with no provider left the client has no endpoint.
func TestDubboProviderInZooKeeperThroughMeshbridge(t *testing.T) {
	z := harness.StartZooKeeper(t)
	p1 := harness.StartDubboProvider(t, harness.DubboProviderOptions{Registry: "zookeeper://" + z.Address(), App: "greeter"})
	port := p1.Options().TriPort
	b := startBridge(t, zookeeperRegistry(z))

	// The ServiceEntry: host, one grpc port, methods annotation, labels.
	eventually(t, 30*time.Second, "the provider's ServiceEntries", func() error {
		objs, err := servedObjects(b)
		if err != nil {
			return err
		}
		se, ok := objs["ServiceEntry/"+greetHost]
		if !ok {
			return fmt.Errorf("no ServiceEntry %s in %d objects", greetHost, len(objs))
		}
		var spec struct {
			Ports []struct {
				Name     string `json:"name"`
				Number   int    `json:"number"`
				Protocol string `json:"protocol"`
			} `json:"ports"`
		}
		if err := json.Unmarshal(se.Spec, &spec); err != nil {
			return err
		}
		if len(spec.Ports) != 1 || spec.Ports[0].Name != "grpc-"+strconv.Itoa(port) || spec.Ports[0].Protocol != "GRPC" {
			return fmt.Errorf("ports %+v, want grpc-%d GRPC", spec.Ports, port)
		}
		if got := se.Annotations["meshbridge.io/dubbo-methods"]; got != "Greet,Hello,greet,hello" {
			return fmt.Errorf("methods annotation %q", got)
		}
		if _, ok := objs["ServiceEntry/greeter.dubbo"]; !ok {
			return fmt.Errorf("no application-level ServiceEntry greeter.dubbo")
		}
		for _, o := range objs {
			if o.Kind == "WorkloadEntry" && strings.HasPrefix(o.Name, greetHost+"-") {
				var we servedWorkloadEntry
				if err := json.Unmarshal(o.Spec, &we); err != nil {
					return err
				}
				// registries/dubbo rule 5: what users select by stays,
				// Dubbo's own parameters do not.
				if we.Labels["application"] != "greeter" || we.Labels["interface"] != "" || we.Labels["pid"] != "" ||
					we.Labels["timestamp"] != "" || we.Labels["side"] != "" {
					return fmt.Errorf("WorkloadEntry labels %v", we.Labels)
				}
				return nil
			}
		}
		return fmt.Errorf("no WorkloadEntry of %s", greetHost)
	})

	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///%s:%d", greetHost, port), "-method", greetMethod)
	m := c.mark()
	c.waitSettled(m, 30*time.Second, greeting(p1))
	app := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///greeter.dubbo:%d", port), "-method", greetMethod)
	app.waitSettled(app.mark(), 30*time.Second, greeting(p1))
	app.stop()

	// A second provider of the same service: a second endpoint (its port
	// maps through its WorkloadEntry).
	p2 := harness.StartDubboProvider(t, harness.DubboProviderOptions{Registry: "zookeeper://" + z.Address(), App: "greeter"})
	m = c.mark()
	c.waitSettled(m, 30*time.Second, greeting(p1), greeting(p2))

	// SIGTERM: dubbo-go removes its application-level node at once and
	// leaves the interface-level one to its session's expiry (at most 4 s
	// after the exit with this ZooKeeper).
	p1.Stop()
	m = c.mark()
	c.waitSettled(m, 30*time.Second, greeting(p2))

	p2.Stop()
	m = c.mark()
	c.waitFailing(m, 30*time.Second, "calls failing: no provider left")
}

// TestDubboVersionedProvider: a provider with a version gets the version in
// its host; its Triple service answers only calls that carry
// tri-service-version, which a proxyless client must send itself (xDS
// routing cannot add it).
func TestDubboVersionedProvider(t *testing.T) {
	z := harness.StartZooKeeper(t)
	p := harness.StartDubboProvider(t, harness.DubboProviderOptions{
		Registry: "zookeeper://" + z.Address(), App: "greeter-v1", Version: "1.0.0", Register: "interface",
	})
	port := p.Options().TriPort
	b := startBridge(t, zookeeperRegistry(z))
	host := "org.apache.dubbo.demo.greetservice.1-0-0.dubbo"
	target := fmt.Sprintf("xds:///%s:%d", host, port)

	with := startClient(t, b.xdsAddr, target, "-method", greetMethod, "-header", "tri-service-version=1.0.0")
	with.waitSettled(with.mark(), 30*time.Second, greeting(p))

	without := startClient(t, b.xdsAddr, target, "-method", greetMethod)
	without.waitUntil(0, 30*time.Second, "Unimplemented without tri-service-version", func(rs []callResult) bool {
		for _, r := range rs {
			if strings.Contains(r.err, "Unimplemented") {
				return true
			}
		}
		return false
	})
}

// TestDubboBadRegistrationsAreSkipped: a malformed provider URL and an
// interface that cannot make a host are skipped with a reason (log and
// meshbridge_translate_rejected_instances_total); the good provider of the
// same interface is still served.
func TestDubboBadRegistrationsAreSkipped(t *testing.T) {
	z := harness.StartZooKeeper(t)
	conn := z.Client(t)
	backend := startBackend(t, "backend")
	good := "tri://127.0.0.1:" + strconv.Itoa(backend) + "/com.foo.EchoService?interface=com.foo.EchoService&side=provider&methods=Whoami"
	harness.CreatePath(t, conn, "/dubbo/com.foo.EchoService/providers/"+url.QueryEscape(good), nil, zk.FlagEphemeral)
	harness.CreatePath(t, conn, "/dubbo/com.foo.EchoService/providers/"+url.QueryEscape("tri://127.0.0.1:notaport/com.foo.EchoService"), nil, zk.FlagEphemeral)
	inner := "tri://127.0.0.1:" + strconv.Itoa(backend) + "/com.foo.Outer$Inner?interface=com.foo.Outer$Inner&side=provider"
	harness.CreatePath(t, conn, "/dubbo/com.foo.Outer$Inner/providers/"+url.QueryEscape(inner), nil, zk.FlagEphemeral)
	b := startBridge(t, zookeeperRegistry(z))

	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///com.foo.echoservice.dubbo:%d", backend))
	c.waitSettled(c.mark(), 30*time.Second, "backend")
	eventually(t, 15*time.Second, "both rejections counted", func() error {
		m, err := scrape(b.httpAddr)
		if err != nil {
			return err
		}
		for _, series := range []string{
			`meshbridge_translate_rejected_instances_total{reason="malformed",registry="zk-dubbo"}`,
			`meshbridge_translate_rejected_instances_total{reason="invalid-host",registry="zk-dubbo"}`,
		} {
			if v, ok := m.get(series); !ok || v < 1 {
				return fmt.Errorf("%s = %v", series, v)
			}
		}
		return nil
	})
	out, err := exec.Command(bins.meshbridge, "translate", "--config", b.cfgPath).CombinedOutput()
	if err != nil {
		t.Fatalf("translate: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "- com.foo.echoservice.dubbo") || !strings.Contains(string(out), "meshbridge.io/dubbo-methods: Whoami") {
		t.Errorf("translate output lacks the Dubbo ServiceEntry:\n%s", out)
	}
	data, err := os.ReadFile(b.proc.log)
	if err != nil {
		t.Fatal(err)
	}
	log := string(data)
	for _, want := range []string{`reason=malformed`, `invalid port \":notaport\"`, `reason=invalid-host`, "com.foo.outer$inner.dubbo"} {
		if !strings.Contains(log, want) {
			t.Errorf("bridge log lacks %q", want)
		}
	}
}

// TestDubboProviderInNacosThroughMeshbridge: the same dubbo-go provider
// registered in the Nacos server at both levels, read with
// nacos.dubbo.enabled, is called through meshbridge at the same
// interface-level host as from ZooKeeper and at its application-level host;
// it does not appear under a Nacos host.
func TestDubboProviderInNacosThroughMeshbridge(t *testing.T) {
	nacosServer := harness.StartNacos(t)
	p := harness.StartDubboProvider(t, harness.DubboProviderOptions{Registry: "nacos://" + nacosServer.Address(), App: "greeter"})
	port := p.Options().TriPort
	b := startBridge(t, fmt.Sprintf("registries:\n- name: nacos-dubbo\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s, dubbo: {enabled: true}}\n",
		nacosServer.Address()))

	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///%s:%d", greetHost, port), "-method", greetMethod)
	c.waitSettled(c.mark(), 30*time.Second, greeting(p))
	app := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///greeter.dubbo:%d", port), "-method", greetMethod)
	app.waitSettled(app.mark(), 30*time.Second, greeting(p))

	objs, err := servedObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	for key := range objs {
		if strings.HasSuffix(key, ".nacos") || strings.Contains(key, ".nacos-") {
			t.Errorf("a Dubbo service under a Nacos host: %s", key)
		}
	}
	if got := objs["ServiceEntry/"+greetHost].Annotations["meshbridge.io/dubbo-methods"]; got != "Greet,Hello,greet,hello" {
		t.Errorf("methods annotation %q", got)
	}
}

// TestDubboJavaProviderInZooKeeperThroughMeshbridge: a real Apache Dubbo
// (Java) 3.3.6 provider (Triple and the Dubbo protocol, version 1.0.0,
// registered at interface and application level in a real ZooKeeper, with
// remote metadata) is called through meshbridge by the proxyless grpc-go
// client at its interface-level and its application-level host; its
// SIGTERM takes its endpoints away. Dubbo Java registers no loopback
// address: the test binary runs in its own network namespace, where the
// provider binds and registers harness.NetNSAddress.
func TestDubboJavaProviderInZooKeeperThroughMeshbridge(t *testing.T) {
	z := harness.StartZooKeeper(t)
	p := harness.StartDubboJavaProvider(t, harness.DubboProviderOptions{
		Registry: "zookeeper://" + z.Address(), App: "greeter-java", Version: "1.0.0",
		Protocols: []string{"tri", "dubbo"}, MetadataType: "remote",
	})
	port := p.Options().TriPort
	b := startBridge(t, zookeeperRegistry(z))
	const host = "org.apache.dubbo.demo.greetservice.1-0-0.dubbo"

	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///%s:%d", host, port), "-method", greetMethod)
	c.waitSettled(c.mark(), 60*time.Second, greeting(p))
	app := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///greeter-java.dubbo:%d", port), "-method", greetMethod)
	app.waitSettled(app.mark(), 60*time.Second, greeting(p))

	objs, err := servedObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	// The interface level's methods from its URLs; the application
	// level's from its remote MetadataInfo (/dubbo/metadata/<app>/<revision>).
	for _, se := range []string{host, "greeter-java.dubbo"} {
		if got := objs["ServiceEntry/"+se].Annotations["meshbridge.io/dubbo-methods"]; got != "Greet,Hello,greet,hello" {
			t.Errorf("%s: methods annotation %q", se, got)
		}
	}

	// SIGTERM: Dubbo Java removes its nodes at once, at both levels.
	p.Stop()
	m := c.mark()
	c.waitFailing(m, 30*time.Second, "calls failing: the provider left")
}

// TestDubboJavaProviderInNacosThroughMeshbridge: the Apache Dubbo (Java)
// provider registered in the Nacos server at interface level only, in a
// group, with local metadata (its MetadataService), read with
// nacos.dubbo.enabled: grpc-go calls it through meshbridge at its
// interface-level host, which carries the group.
func TestDubboJavaProviderInNacosThroughMeshbridge(t *testing.T) {
	nacosServer := harness.StartNacos(t)
	p := harness.StartDubboJavaProvider(t, harness.DubboProviderOptions{
		Registry: "nacos://" + nacosServer.Address(), App: "greeter-java", Group: "g1", Register: "interface",
		Protocols: []string{"tri"}, MetadataType: "local",
	})
	port := p.Options().TriPort
	b := startBridge(t, fmt.Sprintf("registries:\n- name: nacos-dubbo\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s, dubbo: {enabled: true}}\n",
		nacosServer.Address()))
	const host = "org.apache.dubbo.demo.greetservice.g1.dubbo"
	c := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///%s:%d", host, port), "-method", greetMethod, "-header", "tri-service-group=g1")
	c.waitSettled(c.mark(), 60*time.Second, greeting(p))
	objs, err := servedObjects(b)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := objs["ServiceEntry/greeter-java.dubbo"]; ok {
		t.Errorf("an application-level host for a provider registered at interface level only")
	}
}

// TestDubboJavaProviderInNacosApplicationLevel: the Apache Dubbo (Java)
// provider registered in the Nacos server at both levels (register-mode
// all, Triple), read with nacos.dubbo.enabled, is called through meshbridge
// at its application-level host by grpc-go and by grpc-java, and by grpc-go
// at its interface-level host; its SIGTERM takes the endpoints away from
// both clients.
func TestDubboJavaProviderInNacosApplicationLevel(t *testing.T) {
	nacosServer := harness.StartNacos(t)
	p := harness.StartDubboJavaProvider(t, harness.DubboProviderOptions{
		Registry: "nacos://" + nacosServer.Address(), App: "greeter-java", Register: "both",
		Protocols: []string{"tri"}, MetadataType: "local",
	})
	port := p.Options().TriPort
	b := startBridge(t, fmt.Sprintf("registries:\n- name: nacos-dubbo\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s, dubbo: {enabled: true}}\n",
		nacosServer.Address()))
	appTarget := fmt.Sprintf("xds:///greeter-java.dubbo:%d", port)

	app := startClient(t, b.xdsAddr, appTarget, "-method", greetMethod)
	app.waitSettled(app.mark(), 60*time.Second, greeting(p))
	iface := startClient(t, b.xdsAddr, fmt.Sprintf("xds:///%s:%d", greetHost, port), "-method", greetMethod)
	iface.waitSettled(iface.mark(), 60*time.Second, greeting(p))

	cmd := javaClient(t, appTarget, callOpts{})
	cmd.Args = append(cmd.Args, "--method", greetMethod, "--message", "meshbridge")
	boot := renderBootstrap(t, "--node-id", "e2e-grpc-java-dubbo", "--xds-address", b.xdsAddr)
	java := runProxyless(t, "grpc-java", cmd, boot)
	java.waitSettled(0, 60*time.Second, greeting(p))

	p.Stop()
	for _, c := range []*client{app, java} {
		c.waitFailing(c.mark(), 30*time.Second, "calls failing: the provider left")
	}
}

// waitFailing waits until the client's last 10 calls since mark failed.
func (c *client) waitFailing(mark int, timeout time.Duration, what string) {
	c.t.Helper()
	c.waitUntil(mark, timeout, what, func(rs []callResult) bool {
		n := 0
		for _, r := range rs {
			if r.backend != "" {
				n = 0
				continue
			}
			n++
		}
		return n >= 10
	})
}

// TestDubboProviderTimeoutDefault: a provider registering timeout=200 in
// ZooKeeper, whose Greet answers after 2s, has its calls from a proxyless
// client (deadline 5s) end DEADLINE_EXCEEDED with no VirtualService: the
// provider's declared timeout is the route's. A VirtualService with a 5s
// timeout then overrides it: the calls succeed. Both providers, dubbo-go
// and Apache Dubbo (Java), whose URLs differ; at interface level (the URL's
// parameter) and at application level (its MetadataInfo's, kept remote);
// and the Java provider's URL parameter registered in the Nacos server.
func TestDubboProviderTimeoutDefault(t *testing.T) {
	for _, impl := range []struct {
		name     string
		start    func(testing.TB, harness.DubboProviderOptions) *harness.DubboProvider
		register string
		nacos    bool
	}{
		{"dubbo-go", harness.StartDubboProvider, "interface", false},
		{"dubbo-java", harness.StartDubboJavaProvider, "interface", false},
		{"dubbo-go application level", harness.StartDubboProvider, "application", false},
		{"dubbo-java application level", harness.StartDubboJavaProvider, "application", false},
		{"dubbo-java in Nacos", harness.StartDubboJavaProvider, "interface", true},
	} {
		t.Run(impl.name, func(t *testing.T) {
			opts := harness.DubboProviderOptions{App: "slow-greeter", Register: impl.register, MetadataType: "remote",
				Params: map[string]string{"timeout": "200"}, GreetDelay: 2 * time.Second}
			var registry string
			if impl.nacos {
				n := harness.StartNacos(t)
				opts.Registry, opts.MetadataType, opts.Protocols = "nacos://"+n.Address(), "local", []string{"tri"}
				registry = fmt.Sprintf("registries:\n- name: nacos-dubbo\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s, dubbo: {enabled: true}}\n",
					n.Address())
			} else {
				z := harness.StartZooKeeper(t)
				opts.Registry, registry = "zookeeper://"+z.Address(), zookeeperRegistry(z)
			}
			p := impl.start(t, opts)
			host := greetHost
			if impl.register == "application" {
				host = "slow-greeter.dubbo"
			}
			port := p.Options().TriPort
			policyFile := filepath.Join(t.TempDir(), "policy.yaml")
			if err := os.WriteFile(policyFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
			b := startBridge(t, registry+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
			target := fmt.Sprintf("xds:///%s:%d", host, port)
			c := startClient(t, b.xdsAddr, target, "-method", greetMethod, "-timeout", "5s")
			c.waitUntil(0, 60*time.Second, "3 calls in a row ended DEADLINE_EXCEEDED", func(rs []callResult) bool {
				return len(rs) >= 3 && !slices.ContainsFunc(rs[len(rs)-3:], func(r callResult) bool {
					return !isStatus(r.err, "DEADLINE_EXCEEDED")
				})
			})
			if i := slices.IndexFunc(c.since(0), func(r callResult) bool { return r.backend != "" }); i >= 0 {
				t.Fatalf("call %d succeeded past the provider's 200ms timeout: %+v", i, c.since(0)[i])
			}

			if err := os.WriteFile(policyFile, []byte(virtualService("greet", host,
				"    route:\n    - destination: {host: "+host+"}\n    timeout: 5s\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			c.waitReached(c.mark(), greeting(p), 60*time.Second)
		})
	}
}

// TestDubboSubsetWeights: gray release by what Dubbo providers register.
// Three Apache Dubbo (Java) providers of one interface, on their own
// ports, declare the URL parameter gray=v1, v1 and v2 in ZooKeeper (a
// parameter of the user's: Dubbo writes release itself, its own version); a
// DestinationRule's subsets select by it (registry labels) and a
// VirtualService sends 90 % of calls to subset v1, 10 % to v2. Of 1,000
// calls, all answered, between 5 % and 15 % reach the v2 provider and
// both v1 providers are reached.
//
// A Dubbo service version cannot be split so: it is part of the service's
// key, so a provider of 1.0.0 answers only calls carrying
// tri-service-version: 1.0.0 (TestDubboVersionedProvider), and a
// proxyless client sends one header whichever subset xDS picks; each
// version is a host of its own.
func TestDubboSubsetWeights(t *testing.T) {
	const calls = 1000
	z := harness.StartZooKeeper(t)
	start := func(release string) *harness.DubboProvider {
		return harness.StartDubboJavaProvider(t, harness.DubboProviderOptions{
			Registry: "zookeeper://" + z.Address(), App: "gray-greeter", Register: "interface",
			Params: map[string]string{"gray": release},
		})
	}
	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(versionSubsets("gray-greeter", greetHost, "gray")+
		virtualService("gray-greeter", greetHost, "    route:\n    - destination: {host: "+greetHost+", subset: v1}\n"+
			"      weight: 90\n    - destination: {host: "+greetHost+", subset: v2}\n      weight: 10\n")), 0o644); err != nil {
		t.Fatal(err)
	}
	// The first provider's port is the host's (it stays while the host
	// has an instance); the others map through their WorkloadEntries.
	v1a := start("v1")
	b := startBridge(t, zookeeperRegistry(z)+fmt.Sprintf("policy: {files: [%q]}\n", policyFile))
	target := fmt.Sprintf("xds:///%s:%d", greetHost, v1a.Options().TriPort)
	first := startClient(t, b.xdsAddr, target, "-method", greetMethod)
	first.waitReached(0, greeting(v1a), 60*time.Second)
	first.stop()
	v1b, v2 := start("v1"), start("v2")

	c := startClient(t, b.xdsAddr, target, "-method", greetMethod, "-interval", "2ms", "-timeout", "5s")
	assertSplit(t, c, calls, greeting(v2), greeting(v1a), greeting(v1b))
	assertNoNACKs(t, b)
}
