package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/clients"
	"github.com/nacos-group/nacos-sdk-go/v2/clients/naming_client"
	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/vo"

	"github.com/meshbridge/meshbridge/test/harness"
)

// nacosRegistry is the Nacos server (3.1.0, tools/build.sh nacos) run as
// meshbridge's tests run it (harness.NacosServer: standalone, every
// listener it lets one choose on 127.0.0.1, auth off). Its JRaft port binds
// every interface: the demo runs in a network namespace of its own when the
// machine lets it (harness.ReexecInNetNS). Each instance registers itself
// as an application does: with a nacos-sdk-go naming client of its own, as
// an ephemeral instance over the Nacos gRPC API, which lives as long as
// that client's connection.
type nacosRegistry struct {
	classpath string // the server's JVM classpath
	dir       string // the demo's directory
	onStop    func(func())
	server    harness.NacosServer
	apps      map[string]*nacosApp
}

// nacosApp is one registered instance and its naming client.
type nacosApp struct {
	client naming_client.INamingClient
	reg    vo.RegisterInstanceParam
}

func (n *nacosRegistry) name() string { return "Nacos" }

func (n *nacosRegistry) registered() string {
	return "in Nacos with its own nacos-sdk-go naming client, ephemeral over gRPC"
}

// host is the nacos registry's default host template,
// {{.Service}}.{{.Group}}.{{.Namespace}}.nacos, lower-cased with "_" as "-",
// for service echo of group DEFAULT_GROUP in namespace public.
func (n *nacosRegistry) host() string { return "echo.default-group.public.nacos" }

// addr is the Nacos HTTP API's address.
func (n *nacosRegistry) addr() string { return n.server.Address() }

func (n *nacosRegistry) config() string {
	return fmt.Sprintf(`- name: nacos-demo
  type: nacos
  nacos:
    addresses: [%s]   # the Nacos HTTP API; gRPC on its port + 1000
`, n.addr())
}

func (n *nacosRegistry) start(d *demo) error {
	port, err := harness.FindNacosPort()
	if err != nil {
		return err
	}
	n.dir, n.onStop = d.dir, d.onStop
	home := filepath.Join(d.dir, "nacos")
	if n.server, err = harness.NewNacosServer(home, port, false); err != nil {
		return err
	}
	if ok, why := harness.InNetNS(); !ok {
		say("Note: Nacos's JRaft port (127.0.0.1:%d - 1000) binds every interface; the demo runs in the machine's network namespace (%s)", port, why)
	}
	say("Starting the Nacos server 3.1.0 (HTTP API on %s, gRPC API on 127.0.0.1:%d)", n.addr(), n.server.GRPCPort())
	cmd := exec.Command("java", n.server.JavaArgs(n.classpath)...)
	if err := d.start("nacos", cmd, n.closed); err != nil {
		return err
	}
	list := "http://" + n.addr() + "/nacos/v1/ns/service/list?pageNo=1&pageSize=1"
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if resp, err := hc.Get(list); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && dials(n.server.GRPCPort()) {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("nacos did not serve its API within 3m (logs: %s, %s)",
		filepath.Join(d.dir, "nacos.log"), filepath.Join(home, "logs"))
}

// closed reports that no Nacos listener accepts connections any more.
func (n *nacosRegistry) closed() bool {
	for _, port := range []int{n.server.Port, n.server.GRPCPort(), n.server.GRPCPort() + 1} {
		if dials(port) {
			return false
		}
	}
	return true
}

func dials(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 200*time.Millisecond)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

func (n *nacosRegistry) register(id string, port int) error {
	client, err := n.newClient(id)
	if err != nil {
		return err
	}
	app := &nacosApp{client: client, reg: vo.RegisterInstanceParam{
		Ip: "127.0.0.1", Port: uint64(port), ServiceName: "echo", GroupName: constant.DEFAULT_GROUP,
		Weight: 1, Enable: true, Healthy: true, Ephemeral: true,
		Metadata: map[string]string{"protocol": "grpc", "zone": "zone-a", "version": "v1"},
	}}
	if n.apps == nil {
		n.apps = map[string]*nacosApp{}
	}
	n.apps[id] = app
	// A register right after the client connected can meet a server that
	// has not registered the connection yet; the SDK reconnects, and the
	// application tries again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok, err := client.RegisterInstance(app.reg)
		if err == nil && ok {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("register %s in nacos: %v (ok=%t)", id, err, ok)
		}
		time.Sleep(200 * time.Millisecond)
	}
	return n.waitListed(id, port)
}

// waitListed polls until the Nacos HTTP API lists instance 127.0.0.1:port
// of echo, so that the bridge started next finds echo in its first
// listing.
func (n *nacosRegistry) waitListed(id string, port int) error {
	list := "http://" + n.addr() + "/nacos/v1/ns/instance/list?serviceName=DEFAULT_GROUP%40%40echo&healthyOnly=false"
	hc := &http.Client{Timeout: 2 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if listed(hc, list, port) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("nacos did not list %s (127.0.0.1:%d) within 15s", id, port)
}

// listed reports whether the instance list at url holds 127.0.0.1:port.
func listed(hc *http.Client, url string, port int) bool {
	resp, err := hc.Get(url)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var svc struct {
		Hosts []struct {
			IP   string `json:"ip"`
			Port int    `json:"port"`
		} `json:"hosts"`
	}
	if resp.StatusCode != http.StatusOK || json.NewDecoder(resp.Body).Decode(&svc) != nil {
		return false
	}
	for _, h := range svc.Hosts {
		if h.IP == "127.0.0.1" && h.Port == port {
			return true
		}
	}
	return false
}

// deregister does what an application does when it stops: deregister its
// instance and close its client.
func (n *nacosRegistry) deregister(id string) error {
	app := n.apps[id]
	if app == nil {
		return fmt.Errorf("deregister %s: not registered", id)
	}
	ok, err := app.client.DeregisterInstance(vo.DeregisterInstanceParam{
		Ip: app.reg.Ip, Port: app.reg.Port, ServiceName: app.reg.ServiceName, GroupName: app.reg.GroupName, Ephemeral: true,
	})
	if err != nil || !ok {
		return fmt.Errorf("deregister %s from nacos: %v (ok=%t)", id, err, ok)
	}
	app.client.CloseClient()
	delete(n.apps, id)
	return nil
}

// newClient is a naming client of the public namespace for application id,
// configured with the Nacos HTTP address only (it derives the gRPC port);
// the SDK's log and cache go to the demo's directory. stopAll closes it
// before it stops the server.
func (n *nacosRegistry) newClient(id string) (naming_client.INamingClient, error) {
	dir := filepath.Join(n.dir, "nacos-sdk")
	cc := constant.NewClientConfig(
		constant.WithTimeoutMs(5000),
		constant.WithNotLoadCacheAtStart(true),
		constant.WithLogDir(filepath.Join(dir, "log")),
		constant.WithCacheDir(filepath.Join(dir, "cache", id)),
		constant.WithLogLevel("warn"),
	)
	client, err := clients.NewNamingClient(vo.NacosClientParam{
		ClientConfig:  cc,
		ServerConfigs: []constant.ServerConfig{*constant.NewServerConfig("127.0.0.1", uint64(n.server.Port))},
	})
	if err != nil {
		return nil, fmt.Errorf("nacos naming client for %s: %w", id, err)
	}
	n.onStop(client.CloseClient)
	return client, nil
}
