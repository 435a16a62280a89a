package harness

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// greetService is the provider's default interface.
const greetService = "org.apache.dubbo.demo.GreetService"

// TestDubboProviderZooKeeper: a provider registering at both levels writes
// its provider URL (methods Greet,greet,Hello,hello, weight), its
// application instance (Curator JSON with the Dubbo metadata) and the
// interface → application mapping, listens on 127.0.0.1 only, and answers a
// plain grpc-go client (Greet, health); Stop removes its instance at once and
// its interface URL at session expiry. A second provider, interface level
// only, with a version and both protocols, answers only calls carrying the
// version, and once killed its node goes at session expiry.
func TestDubboProviderZooKeeper(t *testing.T) {
	z := StartZooKeeper(t)
	registry := "zookeeper://" + z.Address()
	both := StartDubboProvider(t, DubboProviderOptions{Registry: registry, App: "greeter", Weight: 7})
	versioned := StartDubboProvider(t, DubboProviderOptions{
		Registry: registry, Register: "interface", App: "greeter-v1", Version: "1.0.0",
		Protocols: []string{"tri", "dubbo"}, MetadataType: "remote",
	})
	bo, vo := both.Options(), versioned.Options()
	assertListeners(t, both.Pid(), []int{bo.TriPort, bo.MetadataPort})
	assertListeners(t, versioned.Pid(), []int{vo.TriPort, vo.DubboPort})
	if both.DubboAddress() != "" || both.TriAddress() != "127.0.0.1:"+strconv.Itoa(bo.TriPort) || versioned.MetadataAddress() != "" {
		t.Fatalf("addresses: tri %q dubbo %q, versioned metadata %q", both.TriAddress(), both.DubboAddress(), versioned.MetadataAddress())
	}
	conn := z.Client(t)

	// Interface level: one provider URL per protocol, URL-encoded.
	providers := "/dubbo/" + greetService + "/providers"
	nodes := zkChildren(t, conn, providers)
	if len(nodes) != 3 {
		t.Fatalf("%s: %d nodes, want 3 (both's tri, versioned's tri and dubbo): %q", providers, len(nodes), nodes)
	}
	bothNode, bothURL := providerURL(t, nodes, "tri", both.TriAddress())
	if !strings.HasPrefix(bothNode, "tri%3A%2F%2F127.0.0.1%3A") || !strings.Contains(bothNode, "%26methods%3DGreet%2Cgreet%2CHello%2Chello%26") {
		t.Errorf("node of %s not URL-encoded as ZooKeeper's Dubbo registries write it: %q", both.TriAddress(), bothNode)
	}
	wantParams(t, bothURL, map[string]string{
		"interface": greetService, "application": "greeter", "side": "provider", "methods": "Greet,greet,Hello,hello",
		"weight": "7", "registry.type": "all", "version": "",
	})
	_, vTri := providerURL(t, nodes, "tri", versioned.TriAddress())
	wantParams(t, vTri, map[string]string{
		"application": "greeter-v1", "version": "1.0.0", "registry.type": "interface", "weight": "0",
	})
	_, vDubbo := providerURL(t, nodes, "dubbo", versioned.DubboAddress())
	wantParams(t, vDubbo, map[string]string{
		"application": "greeter-v1", "version": "1.0.0", "methods": "Greet,greet,Hello,hello",
	})

	// Application level: both's instance only.
	if got := zkChildren(t, conn, "/services"); !slices.Equal(got, []string{"greeter"}) {
		t.Fatalf("/services: %q, want [greeter]", got)
	}
	instance := "/services/greeter/" + both.TriAddress()
	var inst struct {
		Name    string `json:"name"`
		Address string `json:"address"`
		Port    int    `json:"port"`
		Payload struct {
			Metadata map[string]string `json:"metadata"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(zkData(t, conn, instance), &inst); err != nil {
		t.Fatalf("%s: %v", instance, err)
	}
	md := inst.Payload.Metadata
	wantEndpoints := fmt.Sprintf(`[{"port":%d,"protocol":"tri"}]`, bo.TriPort)
	if inst.Name != "greeter" || inst.Address != "127.0.0.1" || inst.Port != bo.TriPort ||
		md["dubbo.endpoints"] != wantEndpoints || md["dubbo.metadata.storage-type"] != "local" || md["dubbo.metadata.revision"] == "" ||
		!strings.Contains(md["dubbo.metadata-service.url-params"], `"port":"`+strconv.Itoa(bo.MetadataPort)+`"`) {
		t.Fatalf("%s: %+v", instance, inst)
	}
	if got := string(zkData(t, conn, "/dubbo/mapping/"+greetService)); got != "greeter" {
		t.Fatalf("mapping of %s: %q, want greeter", greetService, got)
	}

	// Triple: a plain gRPC client; the versioned service needs the version.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if got, err := greet(ctx, t, both.TriAddress(), "Greet"); err != nil || got != "hello grpc-go from greeter@"+both.TriAddress() {
		t.Fatalf("Greet at %s: %q, %v", both.TriAddress(), got, err)
	}
	if got, err := greet(ctx, t, both.TriAddress(), "Hello"); err != nil || got != "hi grpc-go from greeter@"+both.TriAddress() {
		t.Fatalf("Hello at %s: %q, %v", both.TriAddress(), got, err)
	}
	for _, svc := range []string{"", greetService} {
		if s, err := healthCheck(ctx, t, both.TriAddress(), svc); err != nil || s != healthpb.HealthCheckResponse_SERVING {
			t.Fatalf("health of %q at %s: %v, %v", svc, both.TriAddress(), s, err)
		}
	}
	if _, err := greet(ctx, t, versioned.TriAddress(), "Greet"); status.Code(err) != codes.Unimplemented {
		t.Fatalf("Greet without tri-service-version at %s: %v, want Unimplemented", versioned.TriAddress(), err)
	}
	vctx := metadata.AppendToOutgoingContext(ctx, "tri-service-version", "1.0.0")
	if got, err := greet(vctx, t, versioned.TriAddress(), "Greet"); err != nil || got != "hello grpc-go from greeter-v1@"+versioned.TriAddress() {
		t.Fatalf("Greet with tri-service-version at %s: %q, %v", versioned.TriAddress(), got, err)
	}
	if s, err := healthCheck(ctx, t, versioned.TriAddress(), greetService+":1.0.0"); err != nil || s != healthpb.HealthCheckResponse_SERVING {
		t.Fatalf("health of %s:1.0.0: %v, %v", greetService, s, err)
	}

	// Stop: the instance goes at SIGTERM; the interface URL stays until the
	// session expires, a few seconds after the exit (see dubbo.go).
	start := time.Now()
	both.Stop()
	t.Logf("Stop took %s", time.Since(start).Round(time.Millisecond))
	if both.Pid() != 0 {
		t.Fatalf("Pid %d after Stop", both.Pid())
	}
	if ok, _, err := conn.Exists(instance); err != nil || ok {
		t.Fatalf("%s after Stop: exists %v, %v", instance, ok, err)
	}
	if ok, _, err := conn.Exists(providers + "/" + bothNode); err != nil || !ok {
		t.Fatalf("interface URL of the stopped provider: exists %v, %v; want it kept until its session expires", ok, err)
	}
	waitGone(t, conn, providers+"/"+bothNode)

	// Kill: the node goes with the session.
	versioned.Kill()
	if versioned.Pid() != 0 {
		t.Fatalf("Pid %d after Kill", versioned.Pid())
	}
	Eventually(t, 3*ZooKeeperMaxSessionTimeout, "versioned provider's nodes gone after Kill", func() error {
		if got := zkChildren(t, conn, providers); len(got) != 0 {
			return fmt.Errorf("%s: %q", providers, got)
		}
		return nil
	})
}

// waitGone waits for node to go within three session timeouts.
func waitGone(t *testing.T, conn *zk.Conn, node string) {
	t.Helper()
	Eventually(t, 3*ZooKeeperMaxSessionTimeout, "node gone: "+node, func() error {
		ok, _, err := conn.Exists(node)
		if err != nil {
			return err
		}
		if ok {
			return errors.New("still there")
		}
		return nil
	})
}

// providerURL finds the node among nodes for scheme://addr/ and returns it
// and its decoded URL.
func providerURL(t *testing.T, nodes []string, scheme, addr string) (string, *url.URL) {
	t.Helper()
	for _, n := range nodes {
		raw, err := url.PathUnescape(n)
		if err != nil {
			t.Fatalf("node %q: %v", n, err)
		}
		if strings.HasPrefix(raw, scheme+"://"+addr+"/") {
			u, err := url.Parse(raw)
			if err != nil {
				t.Fatalf("node %q: %v", raw, err)
			}
			if u.Path != "/"+greetService {
				t.Fatalf("node %q: path %q", raw, u.Path)
			}
			return n, u
		}
	}
	t.Fatalf("no %s://%s/ provider among %q", scheme, addr, nodes)
	return "", nil
}

// wantParams checks u's query parameters; "" wants the parameter absent.
func wantParams(t *testing.T, u *url.URL, want map[string]string) {
	t.Helper()
	q := u.Query()
	for k, v := range want {
		if got, ok := q[k]; (v == "" && ok) || (v != "" && (len(got) != 1 || got[0] != v)) {
			t.Errorf("%s: %s=%q, want %q", u, k, got, v)
		}
	}
}

func zkChildren(t *testing.T, conn *zk.Conn, path string) []string {
	t.Helper()
	c, _, err := conn.Children(path)
	if err != nil {
		t.Fatalf("children of %s: %v", path, err)
	}
	slices.Sort(c)
	return c
}

func zkData(t *testing.T, conn *zk.Conn, path string) []byte {
	t.Helper()
	b, _, err := conn.Get(path)
	if err != nil {
		t.Fatalf("get %s: %v", path, err)
	}
	return b
}

// dialTriple connects a plain grpc-go client to a Triple port.
func dialTriple(t *testing.T, addr string) *grpc.ClientConn {
	t.Helper()
	cc, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("grpc client for %s: %v", addr, err)
	}
	t.Cleanup(func() { cc.Close() })
	return cc
}

// greet calls GreetService's method with "grpc-go" over gRPC.
func greet(ctx context.Context, t *testing.T, addr, method string) (string, error) {
	t.Helper()
	out := new(wrapperspb.StringValue)
	err := dialTriple(t, addr).Invoke(ctx, "/"+greetService+"/"+method, wrapperspb.String("grpc-go"), out)
	return out.GetValue(), err
}

func healthCheck(ctx context.Context, t *testing.T, addr, service string) (healthpb.HealthCheckResponse_ServingStatus, error) {
	t.Helper()
	r, err := healthpb.NewHealthClient(dialTriple(t, addr)).Check(ctx, &healthpb.HealthCheckRequest{Service: service})
	return r.GetStatus(), err
}
