package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"

	"github.com/meshbridge/meshbridge/test/harness"
)

// servedPorts returns the ports of the ServiceEntry of host that the bridge
// serves, "<name>/<protocol>" each.
func servedPorts(b *bridge, host string) ([]string, error) {
	objs, err := servedObjects(b)
	if err != nil {
		return nil, err
	}
	se, ok := objs["ServiceEntry/"+host]
	if !ok {
		return nil, fmt.Errorf("no ServiceEntry %s", host)
	}
	var spec struct {
		Ports []struct {
			Name     string `json:"name"`
			Protocol string `json:"protocol"`
		} `json:"ports"`
	}
	if err := json.Unmarshal(se.Spec, &spec); err != nil {
		return nil, err
	}
	var out []string
	for _, p := range spec.Ports {
		out = append(out, p.Name+"/"+p.Protocol)
	}
	return out, nil
}

// waitPorts waits until host's ServiceEntry has exactly the ports want.
func waitPorts(t *testing.T, b *bridge, host string, want ...string) {
	t.Helper()
	eventually(t, 90*time.Second, fmt.Sprintf("%s with ports %v", host, want), func() error {
		got, err := servedPorts(b, host)
		if err != nil {
			return err
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("ports %v", got)
		}
		return nil
	})
}

// TestSpringCloudNacosApplication: a Spring Cloud Alibaba Nacos Discovery
// application (Spring Boot 3.5.7, registering itself in the real Nacos
// server) is served as HTTP (preserved.register.source=SPRING_CLOUD); a
// case-variant newcomer ("Orders-Service", a replica on another host and
// the same port) joins the established host instead of taking it, and
// leaves it to the established instance; the
// application restarted with protocol metadata grpc turns the running
// bridge's port to grpc, as a freshly started bridge serves it.
func TestSpringCloudNacosApplication(t *testing.T) {
	nacosServer := harness.StartNacos(t)
	app := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "nacos", Address: nacosServer.Address(), Name: "orders-service"})
	b := startBridge(t, fmt.Sprintf("registries:\n- name: nacos-spring\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s}\n",
		nacosServer.Address()))
	const host = "orders-service.default-group.public.nacos"
	port := strconv.Itoa(app.Port())
	waitPorts(t, b, host, "http-"+port+"/HTTP")
	cluster := "outbound|" + port + "||" + host
	w := watchXDS(t, b.xdsAddr)
	w.waitCluster(90*time.Second, cluster, "127.0.0.1:"+port)

	// The newcomer runs as another replica would: another host, the same
	// port (the test binary's network namespace's second address).
	upper := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "nacos", Address: nacosServer.Address(), Name: "Orders-Service",
		Host: harness.NetNSAddress, Port: app.Port()})
	w.waitCluster(90*time.Second, cluster, "127.0.0.1:"+port, harness.NetNSAddress+":"+port)
	upper.Stop()
	w.waitCluster(90*time.Second, cluster, "127.0.0.1:"+port)

	app.Stop()
	grpcApp := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "nacos", Address: nacosServer.Address(), Name: "orders-service",
		Port: app.Port(), Metadata: map[string]string{"protocol": "grpc"}})
	waitPorts(t, b, host, "grpc-"+port+"/GRPC")
	fresh := startBridge(t, fmt.Sprintf("registries:\n- name: nacos-spring\n  type: nacos\n  nacos: {addresses: [%q], relistInterval: 1s}\n",
		nacosServer.Address()))
	waitPorts(t, fresh, host, "grpc-"+port+"/GRPC")
	_ = grpcApp
}

// TestSpringCloudConsulApplication: a Spring Cloud Consul Discovery
// application (its HTTP check of /actuator/health, no protocol) is served as
// HTTP.
func TestSpringCloudConsulApplication(t *testing.T) {
	consul := harness.StartConsul(t)
	app := harness.StartSpringApp(t, harness.SpringAppOptions{Registry: "consul", Address: consul.Address(), Name: "inventory-service"})
	b := startBridge(t, consulRegistry(consul))
	port := strconv.Itoa(app.Port())
	waitPorts(t, b, "inventory-service.service.consul", "http-"+port+"/HTTP")
	w := watchXDS(t, b.xdsAddr)
	w.waitCluster(90*time.Second, "outbound|"+port+"||inventory-service.service.consul", "127.0.0.1:"+port)
}

// waitCluster waits, bounded, until cluster's endpoints are want (sorted
// "address:port").
func (w *xdsWatch) waitCluster(timeout time.Duration, cluster string, want ...string) {
	w.t.Helper()
	slices.Sort(want)
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var got []string
	err := w.s.Wait(ctx, func() error {
		held := w.s.Snapshot(resourcev3.EndpointType)
		if got = endpointsOf(held[resourcev3.EndpointType][cluster]); !slices.Equal(got, want) {
			return errors.New("other endpoints")
		}
		return nil
	})
	if err != nil {
		w.t.Fatalf("cluster %s: endpoints %v, want %v: %v", cluster, got, want, err)
	}
}
