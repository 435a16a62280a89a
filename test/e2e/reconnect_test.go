package e2e

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/consul/api"
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
	"github.com/meshbridge/meshbridge/test/harness"
)

const (
	// reconnectSetSize is how many backends each of the two endpoint sets
	// has: the EDS push that swaps one set for the other is tens of KB.
	reconnectSetSize = 600
	// settleCalls is how many calls in a row must reach only the set the
	// registry lists for the client to have converged, and how many more
	// are then checked against the echo servers' counts.
	settleCalls = 25
	// setCheck is the ID of the node-level check that makes a whole set
	// usable or not (Consul's health endpoint counts node checks).
	setCheck = "reconnect-set"
)

// reconnectCutAt are the cut points of the rounds, as fractions of the
// measured push: its first bytes, its middle, and most of it, past the
// first HTTP/2 DATA frame (16 KiB) of a response that takes two.
var reconnectCutAt = []float64{0.05, 0.5, 0.95}

// echoSet is a set of echo backends, registered in Consul as instances of
// one service on a node of their own, whose node-level check makes the
// whole set usable or not in one write.
type echoSet struct {
	name  string // backend i answers "<name>-<i>"
	node  string
	ports []int
	hits  atomic.Int64 // calls the set's backends served
}

// startEchoSet serves n echo backends on free 127.0.0.1 ports until the
// test ends, counting their calls.
func startEchoSet(t *testing.T, name, node string, n int) *echoSet {
	t.Helper()
	s := &echoSet{name: name, node: node}
	count := func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		s.hits.Add(1)
		return h(ctx, req)
	}
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := grpc.NewServer(grpc.UnaryInterceptor(count))
		echo.Register(srv, fmt.Sprintf("%s-%03d", name, i))
		go func() { _ = srv.Serve(lis) }()
		t.Cleanup(srv.Stop)
		s.ports = append(s.ports, lis.Addr().(*net.TCPAddr).Port)
	}
	return s
}

// owns reports whether a call's backend is one of the set's.
func (s *echoSet) owns(backend string) bool { return strings.HasPrefix(backend, s.name+"-") }

// register writes the set's node (127.0.0.1) with its check critical and
// one instance of svc per backend to Consul's catalog, in transactions of
// at most 64 operations (Consul's limit); the test's cleanup removes the
// node.
func (s *echoSet) register(t *testing.T, consul *harness.Consul, svc string) {
	t.Helper()
	ops := api.TxnOps{
		{Node: &api.NodeTxnOp{Verb: api.NodeSet, Node: api.Node{Node: s.node, Address: "127.0.0.1"}}},
		s.checkOp(api.HealthCritical),
	}
	for i, port := range s.ports {
		ops = append(ops, &api.TxnOp{Service: &api.ServiceTxnOp{Verb: api.ServiceSet, Node: s.node, Service: api.AgentService{
			ID: fmt.Sprintf("%s-%s-%03d", svc, s.name, i), Service: svc, Address: "127.0.0.1", Port: port, Meta: grpcMeta,
		}}})
	}
	for len(ops) > 0 {
		k := min(64, len(ops))
		consulTxn(t, consul, ops[:k])
		ops = ops[k:]
	}
	t.Cleanup(func() {
		if _, err := consul.Client().Catalog().Deregister(&api.CatalogDeregistration{Node: s.node}, nil); err != nil {
			t.Errorf("deregister node %s: %v", s.node, err)
		}
	})
}

// checkOp sets the set's node check to status.
func (s *echoSet) checkOp(status string) *api.TxnOp {
	return &api.TxnOp{Check: &api.CheckTxnOp{Verb: api.CheckSet, Check: api.HealthCheck{
		Node: s.node, CheckID: setCheck, Name: setCheck, Status: status, Output: "set by test",
	}}}
}

// switchSets makes set on usable and set off (if any) not, in one Consul
// transaction: one raft index, so the bridge reads the whole swap in one
// answer and pushes it as one EDS response.
func switchSets(t *testing.T, consul *harness.Consul, on, off *echoSet) {
	t.Helper()
	ops := api.TxnOps{on.checkOp(api.HealthPassing)}
	if off != nil {
		ops = append(ops, off.checkOp(api.HealthCritical))
	}
	consulTxn(t, consul, ops)
}

func consulTxn(t *testing.T, consul *harness.Consul, ops api.TxnOps) {
	t.Helper()
	ok, resp, _, err := consul.Client().Txn().Txn(ops, nil)
	if err != nil {
		t.Fatalf("consul transaction: %v", err)
	}
	if !ok {
		t.Fatalf("consul transaction rolled back: %+v", resp.Errors)
	}
}

// waitOnSet waits until the client's calls after mark reach only set on
// (settleCalls in a row, all successful), then checks settleCalls more:
// every one reaches set on, on's echo servers served them and off's echo
// servers served none. It returns how long the first wait took.
func waitOnSet(t *testing.T, c *client, mark int, on, off *echoSet, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	c.waitUntil(mark, timeout, fmt.Sprintf("%d calls in a row reaching only set %s", settleCalls, on.name), func(rs []callResult) bool {
		if len(rs) < settleCalls {
			return false
		}
		for _, r := range rs[len(rs)-settleCalls:] {
			if !on.owns(r.backend) {
				return false
			}
		}
		return true
	})
	took := time.Since(start)
	offHits, onHits := off.hits.Load(), on.hits.Load()
	m := c.mark()
	c.waitUntil(m, 30*time.Second, fmt.Sprintf("%d more calls", settleCalls), func(rs []callResult) bool { return len(rs) >= settleCalls })
	distinct := map[string]bool{}
	for _, r := range c.since(m) {
		if !on.owns(r.backend) {
			t.Fatalf("after %d calls in a row on set %s, a call did not reach it: backend %q, error %q", settleCalls, on.name, r.backend, r.err)
		}
		distinct[r.backend] = true
	}
	if d := off.hits.Load() - offHits; d != 0 {
		t.Fatalf("set %s's echo servers served %d calls after the client settled on set %s: it still calls endpoints the registry no longer lists", off.name, d, on.name)
	}
	// One call may have been served before onHits was read and printed
	// after the mark.
	if d := on.hits.Load() - onHits; d < settleCalls-1 {
		t.Fatalf("set %s's echo servers served %d calls, the client printed %d on it", on.name, d, settleCalls)
	}
	if len(distinct) < 2 {
		t.Fatalf("%d calls on set %s reached only %v: round robin over %d endpoints should spread them", settleCalls, on.name, distinct, len(on.ports))
	}
	return took
}

// TestProxylessReconnectMidPush: each real proxyless client (grpc-go,
// grpc-js, C-core, grpc-java) follows meshbridge's xDS through a TCP proxy
// the test controls, for a Consul service whose endpoints swap in one step
// between two sets of reconnectSetSize echo backends (a node-level check
// per set, flipped in one transaction). A swap without a cut measures the
// push's bytes; then, in each of three rounds, the next swap is pushed and
// the proxy cuts the client's xDS connection once it has forwarded a part
// of that push (5 %, 50 %, 95 %): the client holds a truncated response
// and a broken stream. It must reconnect by itself through the proxy and
// converge to what the registry lists: its calls reach only the new set,
// whose echo servers count them, and the old set's echo servers (still
// serving) see no more calls. The bridge is left holding the client's new
// stream only, and the client NACKs nothing.
func TestProxylessReconnectMidPush(t *testing.T) {
	consul := harness.StartConsul(t)
	// Inline endpoints: a swap changes one ServiceEntry, so the bridge sends
	// it as one EDS response. (With WorkloadEntries, the default, each
	// instance is an object of its own and a swap of hundreds reaches the
	// client as a series of debounced responses of in-between sets, whose
	// number and sizes vary from run to run.)
	b := startBridge(t, consulRegistry(consul)+"output: {endpoints: inline}\n")
	for _, pc := range proxylessClients {
		t.Run(pc.name, func(t *testing.T) {
			began := time.Now()
			nacks := mustScrape(t, b).sum("meshbridge_xds_nacks_total")
			svc := "reconnect-" + pc.name
			sets := [2]*echoSet{
				startEchoSet(t, "a", svc+"-node-a", reconnectSetSize),
				startEchoSet(t, "b", svc+"-node-b", reconnectSetSize),
			}
			for _, s := range sets {
				s.register(t, consul, svc)
			}
			// The service's port is the lowest instance port of the first
			// instances meshbridge sees: all of set a at once.
			switchSets(t, consul, sets[0], nil)
			target := fmt.Sprintf("xds:///%s.service.consul:%d", svc, slices.Min(sets[0].ports))

			proxy := harness.StartTCPProxy(t, b.xdsAddr)
			cmd := pc.command(t, target, callOpts{interval: 20 * time.Millisecond})
			boot := renderBootstrap(t, "--node-id", "e2e-reconnect-"+pc.name, "--xds-address", proxy.Addr(),
				"--cluster", "e2e", "--locality", "e2e-region/e2e-zone/e2e-subzone")
			c := runProxyless(t, pc.name, cmd, boot)
			took := waitOnSet(t, c, 0, sets[0], sets[1], 60*time.Second)
			t.Logf("on set a %s after the client started, through %d xDS connection(s)", took.Round(time.Millisecond), proxy.Accepted())

			// A swap without a cut: its push is what the client receives
			// until it settles (the EDS response, and HTTP/2 frames around it).
			before, sent := proxy.BytesToClient(), mustScrape(t, b)
			switchSets(t, consul, sets[1], sets[0])
			took = waitOnSet(t, c, c.mark(), sets[1], sets[0], 30*time.Second)
			push := proxy.BytesToClient() - before
			now := mustScrape(t, b)
			responses := now.sum("meshbridge_xds_pushes_total") - sent.sum("meshbridge_xds_pushes_total")
			encoded := now.sum("meshbridge_xds_push_bytes_total") - sent.sum("meshbridge_xds_push_bytes_total")
			t.Logf("swap to set b, no cut: settled in %s; the push was %d bytes on the wire, %v response(s) of %v bytes encoded",
				took.Round(time.Millisecond), push, responses, encoded)
			if responses != 1 {
				t.Fatalf("the swap reached the client as %v responses, not one: the rounds cut at fractions of one response", responses)
			}
			if push < 4096 {
				t.Fatalf("the swap's push was %d bytes: too small to cut in the middle of", push)
			}
			if proxy.Accepted() != 1 {
				t.Fatalf("the client opened %d xDS connections before any cut", proxy.Accepted())
			}

			for round, frac := range reconnectCutAt {
				on, off := sets[round%2], sets[(round+1)%2]
				cutAt := int64(frac * float64(push))
				accepted, m := proxy.Accepted(), c.mark()
				trip := proxy.CutAfter(cutAt)
				start := time.Now()
				switchSets(t, consul, on, off)
				harness.EventuallyTrue(t, 15*time.Second, fmt.Sprintf("round %d: the proxy cuts the push after %d bytes", round+1, cutAt), trip.Fired)
				cut := time.Since(start)
				harness.EventuallyTrue(t, 30*time.Second, fmt.Sprintf("round %d: the client reconnects through the proxy", round+1), func() bool {
					return proxy.Accepted() > accepted
				})
				reconnected := time.Since(start)
				took := waitOnSet(t, c, m, on, off, 30*time.Second)
				// The cut stream ended on the bridge too: one stream is open,
				// the client's new one.
				eventually(t, 15*time.Second, fmt.Sprintf("round %d: the bridge holds only the client's new stream", round+1), func() error {
					ms, err := scrape(b.httpAddr)
					if err != nil {
						return err
					}
					if n := ms.sum("meshbridge_xds_streams"); n != 1 {
						return fmt.Errorf("meshbridge_xds_streams = %v", n)
					}
					return nil
				})
				t.Logf("round %d: swap to set %s cut after %d of ~%d bytes (%d more bytes of the read dropped, %d connection(s) closed) %s after the swap; "+
					"reconnected after %s; settled on set %s after %s",
					round+1, on.name, cutAt, push, trip.Dropped(), trip.Pairs(), cut.Round(time.Millisecond),
					reconnected.Round(time.Millisecond), on.name, (reconnected + took).Round(time.Millisecond))
			}
			if n := mustScrape(t, b).sum("meshbridge_xds_nacks_total") - nacks; n != 0 {
				t.Errorf("the client NACKed %v responses: a truncated response or a reconnect led it to reject what the bridge sent", n)
			}
			errs := c.errorsSince(0)
			t.Logf("%s: %d calls, %d failed, %d xDS connections, %s in all", pc.name, c.mark(), len(errs), proxy.Accepted(), time.Since(began).Round(time.Millisecond))
			for _, e := range errs[:min(len(errs), 5)] {
				t.Logf("failed call at %s: %s", e.at.Format(time.TimeOnly+".000"), e.err)
			}
		})
	}
}
