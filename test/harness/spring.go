package harness

import (
	"cmp"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"
)

// This file runs a Spring Cloud web application (tools/spring-cloud, built
// by tools/build.sh spring-cloud: Spring Boot 3.5.7, Spring Cloud 2025.0.0)
// registering itself as Spring users' applications do: through Spring Cloud
// Alibaba's Nacos Discovery, Spring Cloud Consul Discovery, Spring Cloud
// Netflix's Eureka client or Spring Cloud ZooKeeper Discovery. It serves GET
// / with "spring NAME@PORT" on 127.0.0.1 (or SpringAppOptions.Host).
//
// What Spring registers (and tests must expect):
//   - Nacos: an ephemeral instance over gRPC (nacos-client 3.0.3) in
//     DEFAULT_GROUP with metadata preserved.register.source=SPRING_CLOUD (and
//     its own metadata), no protocol.
//   - Consul: service ID <name>-<port>, Meta {secure: "false"} (and its own
//     metadata), an HTTP check of /actuator/health every 10 s (critical
//     until its first pass), the address 127.0.0.1 (the harness sets
//     prefer-ip-address) or, with SpringAppOptions.Hostname, that DNS name
//     (Spring's default, prefer-ip-address=false, registers the hostname;
//     the check then calls http://<hostname>:<port>/actuator/health).
//   - Eureka (spring-cloud-netflix-eureka-client 4.3.0, eureka-client
//     2.0.4): app NAME upper-cased, instanceId Spring Cloud's default
//     <spring.cloud.client.hostname>:<name>:<port> (the machine's first
//     non-loopback host name or address; tests find it by port), status
//     UP once the application started (STARTING before), hostName and
//     ipAddr Host (the harness sets prefer-ip-address; with
//     SpringAppOptions.Hostname, hostName is that name), port {"$":PORT,
//     "@enabled":"true"}, securePort {"$":443,"@enabled":"false"},
//     vipAddress and secureVipAddress NAME (lower-case as given), metadata
//     {"management.port":"PORT"} and its own, leaseInfo renewal 1 s and
//     duration 3 s (the harness's; Spring's default is 30 s and 90 s). It
//     registers with the first URL of Address that takes it (the server
//     replicates to its peers). On SIGTERM it sets its status DOWN, then
//     deregisters (DELETE): /eureka/apps/delta shows it DELETED with status
//     DOWN.
//   - ZooKeeper (spring-cloud-zookeeper-discovery 4.3.0, Curator 5.8.0
//     x-discovery): an ephemeral znode /services/<name>/<id>, id a random
//     UUID, whose data is Curator's JSON of the ServiceInstance:
//     {"name":NAME,"id":ID,"address":HOST,"port":PORT,"sslPort":null,
//     "payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
//     "id":"NAME","name":"NAME","metadata":{"instance_status":"UP", ...own}},
//     "registrationTimeUTC":MILLIS,"serviceType":"DYNAMIC","uriSpec":{"parts":
//     [{"value":"scheme","variable":true},{"value":"://","variable":false},
//     {"value":"address","variable":true},{"value":":","variable":false},
//     {"value":"port","variable":true}]}} (spring_test.go logs one
//     verbatim). The znode goes on SIGTERM (the session closes) or, killed,
//     when its session expires (the harness's ZooKeeper grants at most 4 s).

// SpringAppOptions configure StartSpringApp.
type SpringAppOptions struct {
	// Registry is "nacos", "consul", "eureka" or "zookeeper"; Address the
	// server's address: Nacos.Address(), Consul.Address(), Eureka.URL()
	// (or the comma-joined URLs of peers), ZooKeeper.Address().
	Registry, Address string
	// Name is spring.application.name, the registered service name.
	Name string
	// Host is the address it binds and registers; "" is 127.0.0.1. Another
	// host of a test binary's network namespace is NetNSAddress.
	Host string
	// Port is server.port; 0 picks a free one.
	Port int
	// Metadata is the instance's own metadata
	// (spring.cloud.<registry>.discovery.metadata.*,
	// eureka.instance.metadata-map.*).
	Metadata map[string]string
	// Hostname (Consul, Eureka, ZooKeeper), when set, is registered as the
	// instance's address instead of Host, as Spring Cloud Consul and Eureka
	// do by default (prefer-ip-address=false, discovery.hostname or
	// eureka.instance.hostname=Hostname; ZooKeeper: instance-host); it must
	// resolve to Host, where the application still binds. "" registers Host
	// (prefer-ip-address=true).
	Hostname string
}

// SpringApp is a running Spring Cloud application started by StartSpringApp.
type SpringApp struct {
	srv  server
	opts SpringAppOptions
}

// StartSpringApp starts the Spring Cloud application with opts and returns
// it once its web server answers GET / (it registers right after). It
// needs tools/build.sh spring-cloud's build ($MESHBRIDGE_SPRING_CLOUD_DIR).
// The test's cleanup stops it (SIGTERM: Spring deregisters).
func StartSpringApp(t testing.TB, opts SpringAppOptions) *SpringApp {
	t.Helper()
	cp := JavaPeerClasspath(t, "spring-cloud", "MESHBRIDGE_SPRING_CLOUD_DIR")
	java := javaPath(t, "spring-cloud")
	if opts.Port == 0 {
		opts.Port = FreePort(t)
	}
	if opts.Host == "" {
		opts.Host = "127.0.0.1"
	}
	dir := t.TempDir()
	props := map[string]string{
		"spring.application.name": opts.Name,
		"server.port":             strconv.Itoa(opts.Port),
		"server.address":          opts.Host,
		"user.home":               dir,
	}
	prefix := ""
	switch opts.Registry {
	case "nacos":
		if opts.Hostname != "" {
			t.Fatalf("StartSpringApp: Hostname %q: Spring Cloud Alibaba registers an IP (spring.cloud.nacos.discovery.ip); use Host", opts.Hostname)
		}
		prefix = "spring.cloud.nacos.discovery."
		props[prefix+"enabled"] = "true"
		props[prefix+"server-addr"] = opts.Address
		props[prefix+"ip"] = opts.Host
		props["JM.LOG.PATH"] = filepath.Join(dir, "nacos-logs")
		props["JM.SNAPSHOT.PATH"] = dir
	case "consul":
		host, port, err := net.SplitHostPort(opts.Address)
		if err != nil {
			t.Fatal(err)
		}
		prefix = "spring.cloud.consul.discovery."
		props["spring.cloud.consul.enabled"] = "true"
		props["spring.cloud.consul.host"] = host
		props["spring.cloud.consul.port"] = port
		props[prefix+"enabled"] = "true"
		if opts.Hostname != "" {
			props[prefix+"prefer-ip-address"] = "false"
			props[prefix+"hostname"] = opts.Hostname
		} else {
			props[prefix+"prefer-ip-address"] = "true"
			props[prefix+"ip-address"] = opts.Host
		}
	case "eureka":
		props["eureka.client.enabled"] = "true"
		props["eureka.client.service-url.defaultZone"] = opts.Address
		props["eureka.client.registry-fetch-interval-seconds"] = "5"
		props["eureka.client.instance-info-replication-interval-seconds"] = "1"
		props["eureka.client.initial-instance-info-replication-interval-seconds"] = "1"
		props["eureka.instance.lease-renewal-interval-in-seconds"] = "1"
		props["eureka.instance.lease-expiration-duration-in-seconds"] = "3"
		if opts.Hostname != "" {
			props["eureka.instance.prefer-ip-address"] = "false"
			props["eureka.instance.hostname"] = opts.Hostname
		} else {
			props["eureka.instance.prefer-ip-address"] = "true"
		}
		props["eureka.instance.ip-address"] = opts.Host
	case "zookeeper":
		prefix = "spring.cloud.zookeeper.discovery."
		props["spring.cloud.zookeeper.enabled"] = "true"
		props["spring.cloud.zookeeper.connect-string"] = opts.Address
		props[prefix+"enabled"] = "true"
		props[prefix+"instance-host"] = cmp.Or(opts.Hostname, opts.Host)
	default:
		t.Fatalf("StartSpringApp: registry %q: want nacos, consul, eureka or zookeeper", opts.Registry)
	}
	meta := prefix + "metadata."
	if opts.Registry == "eureka" {
		meta = "eureka.instance.metadata-map."
	}
	for k, v := range opts.Metadata {
		props[meta+k] = v
	}
	args := slices.Clone(javaJVMFlags)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-D"+k+"="+props[k])
	}
	args = append(args, "-cp", cp, "io.meshbridge.spring.App")
	a := &SpringApp{
		srv: server{
			name: "spring-" + opts.Name, bin: java, args: args, dir: dir,
			log: filepath.Join(dir, "spring.log"), tailLines: 40, readyTimeout: nacosReadyTimeout,
		},
		opts: opts,
	}
	a.srv.stopAtEnd(t)
	a.srv.start(t, a.Address(), a.ready)
	return a
}

// ready tells whether GET / answers.
func (a *SpringApp) ready() error {
	c := &http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + a.Address() + "/")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /: %s: %s", resp.Status, b)
	}
	return nil
}

// Address is the application's address, "host:port".
func (a *SpringApp) Address() string { return net.JoinHostPort(a.opts.Host, strconv.Itoa(a.opts.Port)) }

// Port is the application's port (server.port).
func (a *SpringApp) Port() int { return a.opts.Port }

// Stop stops the application by its PID (SIGTERM: Spring deregisters it).
func (a *SpringApp) Stop() { a.srv.stop() }

// Kill kills the application (SIGKILL by its PID): it deregisters nothing;
// its registration lasts until the registry expires it.
func (a *SpringApp) Kill() { a.srv.kill() }
