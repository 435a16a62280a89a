package main

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/consul/api"
)

// consulRegistry is a Consul agent in dev mode; instances are registered
// with the agent, each with a gRPC health check.
type consulRegistry struct {
	bin    string
	addr   string // HTTP API, 127.0.0.1:port
	client *api.Client
}

func (c *consulRegistry) name() string       { return "Consul" }
func (c *consulRegistry) registered() string { return "in Consul, passing" }
func (c *consulRegistry) host() string       { return "echo.service.consul" }

func (c *consulRegistry) config() string {
	return fmt.Sprintf(`- name: consul-demo
  type: consul
  consul:
    address: %s
`, c.addr)
}

func (c *consulRegistry) start(d *demo) error {
	ports := make([]int, 4)
	for i := range ports {
		p, err := freePort()
		if err != nil {
			return err
		}
		ports[i] = p
	}
	say("Starting Consul (dev agent) on 127.0.0.1:%d", ports[0])
	cmd := exec.Command(c.bin, "agent", "-dev", "-bind", "127.0.0.1", "-client", "127.0.0.1",
		"-advertise", "127.0.0.1", "-http-port", strconv.Itoa(ports[0]), "-serf-lan-port", strconv.Itoa(ports[1]),
		"-serf-wan-port", strconv.Itoa(ports[2]), "-server-port", strconv.Itoa(ports[3]),
		"-dns-port", "-1", "-grpc-port", "-1", "-grpc-tls-port", "-1", "-node", "demo-node")
	if err := d.start("consul", cmd, nil); err != nil {
		return err
	}
	c.addr = fmt.Sprintf("127.0.0.1:%d", ports[0])
	client, err := api.NewClient(&api.Config{Address: c.addr})
	if err != nil {
		return err
	}
	c.client = client
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if leader, err := client.Status().Leader(); err == nil && leader != "" {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("consul did not elect a leader within 30s (log: %s)", filepath.Join(d.dir, "consul.log"))
}

func (c *consulRegistry) register(id string, port int) error {
	return c.client.Agent().ServiceRegister(&api.AgentServiceRegistration{
		ID: id, Name: "echo", Address: "127.0.0.1", Port: port,
		Meta: map[string]string{"protocol": "grpc", "zone": "zone-a"},
		Tags: []string{"version=v1"},
		Check: &api.AgentServiceCheck{
			Name: "grpc health", GRPC: fmt.Sprintf("127.0.0.1:%d", port), Interval: "1s", Status: api.HealthPassing,
		},
	})
}

func (c *consulRegistry) deregister(id string) error {
	return c.client.Agent().ServiceDeregister(id)
}
