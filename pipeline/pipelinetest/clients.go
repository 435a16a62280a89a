package pipelinetest

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// Types are the xDS types a harness client holds and Served compares, in
// the order a client subscribes to them.
var Types = []string{resourcev3.ClusterType, resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}

// Served is what a client holds: type URL → resource name → the resource's
// encoding. Versions are not part of it: two servers version alike content
// differently.
type Served map[string]map[string]string

// servedOf turns a client's record into Served.
func servedOf(held map[string]map[string]*anypb.Any) Served {
	out := make(Served, len(held))
	for typeURL, byName := range held {
		out[typeURL] = make(map[string]string, len(byName))
		for name, a := range byName {
			out[typeURL][name] = string(a.GetValue())
		}
	}
	return out
}

// Diff describes how got differs from want, "" when it does not: per type,
// the names missing, extra and different, with the differing endpoints
// decoded for ClusterLoadAssignments.
func (want Served) Diff(got Served) string {
	var b strings.Builder
	for _, typeURL := range Types {
		w, g := want[typeURL], got[typeURL]
		short := typeURL[strings.LastIndex(typeURL, ".")+1:]
		for _, name := range slices.Sorted(maps.Keys(w)) {
			gv, ok := g[name]
			switch {
			case !ok:
				fmt.Fprintf(&b, "%s %s: missing (want %s)\n", short, name, describe(typeURL, w[name]))
			case gv != w[name]:
				fmt.Fprintf(&b, "%s %s: got %s, want %s\n", short, name, describe(typeURL, gv), describe(typeURL, w[name]))
			}
		}
		for _, name := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[name]; !ok {
				fmt.Fprintf(&b, "%s %s: extra %s\n", short, name, describe(typeURL, g[name]))
			}
		}
	}
	return b.String()
}

// describe renders an encoded resource for a diff: a ClusterLoadAssignment
// as its endpoints, anything else by size.
func describe(typeURL, value string) string {
	if typeURL == resourcev3.EndpointType {
		if _, eps, err := ads.Endpoints(&anypb.Any{TypeUrl: typeURL, Value: []byte(value)}); err == nil {
			return fmt.Sprintf("%v", eps)
		}
	}
	return fmt.Sprintf("(%d bytes)", len(value))
}

// Client is an ADS client of a harness's xDS port, a proxyless gRPC node
// (GENERATOR grpc: it is served all four types) that subscribes like one:
// every Cluster and Listener (wildcard), the ClusterLoadAssignment of each
// cluster and the RouteConfiguration of each listener it holds
// (ads.Options.FollowCDS, FollowLDS), answering every response. SotW or
// Delta.
type Client struct {
	Name  string
	SotW  *ads.SotW
	Delta *ads.Delta
	h     *Harness
	// cancel ends the stream.
	cancel context.CancelFunc
}

// Protocol is a client's ADS variant.
type Protocol int

// The ADS variants.
const (
	SotW Protocol = iota
	Delta
)

func (p Protocol) String() string { return [...]string{"sotw", "delta"}[p] }

// grpcNode is a proxyless gRPC node called id.
func grpcNode(id string) *core.Node {
	return &core.Node{Id: id, Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"GENERATOR": structpb.NewStringValue("grpc"),
	}}}
}

// clientOptions are every harness client's.
func clientOptions(name string) ads.Options {
	return ads.Options{Node: grpcNode(name), FollowCDS: true, FollowLDS: true}
}

// Connect opens a client called name of protocol p and subscribes it;
// it ends with the test (or Close).
func (h *Harness) Connect(name string, p Protocol) *Client {
	h.T.Helper()
	conn := h.dial()
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{Name: name, h: h, cancel: cancel}
	var err error
	switch p {
	case SotW:
		if c.SotW, err = ads.OpenSotW(ctx, conn, clientOptions(name)); err == nil {
			c.SotW.Receive(nil)
			for _, typeURL := range []string{resourcev3.ClusterType, resourcev3.ListenerType} {
				if err = c.SotW.Subscribe(typeURL, []string{"*"}); err != nil {
					break
				}
			}
		}
	case Delta:
		if c.Delta, err = ads.OpenDelta(ctx, conn, clientOptions(name)); err == nil {
			c.Delta.Receive(nil)
			for _, typeURL := range []string{resourcev3.ClusterType, resourcev3.ListenerType} {
				if err = c.Delta.Subscribe(typeURL, []string{"*"}, nil); err != nil {
					break
				}
			}
		}
	}
	if err != nil {
		cancel()
		h.T.Fatalf("client %s: %v", name, err)
	}
	h.T.Cleanup(c.Close)
	return c
}

// Close ends the client's stream and waits for its receive loop.
func (c *Client) Close() {
	c.cancel()
	<-c.done()
}

func (c *Client) done() <-chan struct{} {
	if c.SotW != nil {
		return c.SotW.Done()
	}
	return c.Delta.Done()
}

// Protocol is the client's ADS variant.
func (c *Client) Protocol() Protocol {
	if c.SotW != nil {
		return SotW
	}
	return Delta
}

// Served returns what the client holds now.
func (c *Client) Served() Served {
	if c.SotW != nil {
		return servedOf(c.SotW.Snapshot(Types...))
	}
	return servedOf(c.Delta.Snapshot(Types...))
}

// wait waits, on every change of the client's record, until cond holds.
func (c *Client) wait(ctx context.Context, cond func() error) error {
	if c.SotW != nil {
		return c.SotW.Wait(ctx, cond)
	}
	return c.Delta.Wait(ctx, cond)
}

// Reconnect ends a Delta client's stream and resumes it on a new one with
// initial_resource_versions (ads.Delta.Resume); a SotW client gets a new
// stream that subscribes afresh, as a SotW client must.
func (c *Client) Reconnect() {
	c.h.T.Helper()
	c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if c.SotW != nil {
		nc := c.h.Connect(c.Name, SotW)
		c.SotW, c.cancel = nc.SotW, nc.cancel
		cancel()
		return
	}
	d, err := c.Delta.Resume(ctx, c.h.dial(), nil)
	if err != nil {
		cancel()
		c.h.T.Fatalf("client %s: resume: %v", c.Name, err)
	}
	c.Delta = d
}

// Await waits until the client holds exactly want, failing the test with
// the difference after timeout.
func (c *Client) Await(want Served, timeout time.Duration) {
	c.h.T.Helper()
	if err := c.AwaitErr(want, timeout); err != nil {
		c.h.T.Fatal(err)
	}
}

// AwaitErr is Await returning the failure instead.
func (c *Client) AwaitErr(want Served, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	err := c.wait(ctx, func() error {
		if d := want.Diff(c.Served()); d != "" {
			return fmt.Errorf("%s", d)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("client %s (%s) does not hold what a fresh pipeline serves within %s:\n%w", c.Name, c.Protocol(), timeout, err)
	}
	return nil
}

// complete reports whether a client of a pipeline that does not change
// holds its whole view: Clusters and Listeners answered, and every
// ClusterLoadAssignment and RouteConfiguration it follows them with.
func (c *Client) complete() error {
	state := func(typeURL string) ads.TypeState {
		if c.SotW != nil {
			return c.SotW.State(typeURL)
		}
		return c.Delta.State(typeURL)
	}
	for _, typeURL := range []string{resourcev3.ClusterType, resourcev3.ListenerType} {
		if st := state(typeURL); st.Responses == 0 || st.Pending > 0 {
			return fmt.Errorf("%s not answered yet", typeURL)
		}
	}
	served := c.Served()
	for _, typeURL := range []string{resourcev3.EndpointType, resourcev3.RouteType} {
		for _, name := range state(typeURL).Names {
			if _, ok := served[typeURL][name]; !ok {
				return fmt.Errorf("%s %s not received yet", typeURL, name)
			}
		}
	}
	return nil
}
