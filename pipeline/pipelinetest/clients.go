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
// (GENERATOR grpc: it is served all four types), SotW or Delta, that
// subscribes as its Kind says and answers every response.
type Client struct {
	Name  string
	Kind  Kind
	SotW  *ads.SotW
	Delta *ads.Delta
	h     *Harness
	// watched are a Watch client's cluster names.
	watched []string
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

// Kind is how a client subscribes.
type Kind int

const (
	// FollowAll: every Cluster and Listener by an explicit wildcard ("*"),
	// the ClusterLoadAssignment of each cluster and the
	// RouteConfiguration of each listener it holds (ads.Options.FollowCDS,
	// FollowLDS), as a proxyless gRPC client follows what it is given.
	FollowAll Kind = iota
	// Legacy: Clusters by the legacy wildcard (a first request without
	// names), as Envoy asks, and their ClusterLoadAssignments; no
	// listeners.
	Legacy
	// Watch: the ClusterLoadAssignments of named clusters only, whether
	// they exist or not (Rewatch changes the names), as a client that
	// learnt its clusters elsewhere.
	Watch
)

func (k Kind) String() string { return [...]string{"FollowAll", "Legacy", "Watch"}[k] }

// grpcNode is a proxyless gRPC node called id.
func grpcNode(id string) *core.Node {
	return &core.Node{Id: id, Metadata: &structpb.Struct{Fields: map[string]*structpb.Value{
		"GENERATOR": structpb.NewStringValue("grpc"),
	}}}
}

// Connect opens a FollowAll client called name of protocol p; it ends
// with the test (or Close).
func (h *Harness) Connect(name string, p Protocol) *Client {
	h.T.Helper()
	return h.ConnectKind(name, p, FollowAll)
}

// ConnectKind opens a client of kind k; a Watch client watches clusters.
func (h *Harness) ConnectKind(name string, p Protocol, k Kind, clusters ...string) *Client {
	h.T.Helper()
	c := &Client{Name: name, Kind: k, h: h, watched: slices.Clone(clusters)}
	if err := c.open(p); err != nil {
		h.T.Fatalf("client %s: %v", name, err)
	}
	h.T.Cleanup(c.Close)
	return c
}

// open opens the client's stream of protocol p and subscribes it.
func (c *Client) open(p Protocol) error {
	conn := c.h.dial()
	ctx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	opts := ads.Options{Node: grpcNode(c.Name)}
	var first []string // the types subscribed by wildcard
	switch c.Kind {
	case FollowAll:
		opts.FollowCDS, opts.FollowLDS = true, true
		first = []string{resourcev3.ClusterType, resourcev3.ListenerType}
	case Legacy:
		opts.FollowCDS = true
		first = []string{resourcev3.ClusterType}
	}
	var err error
	c.SotW, c.Delta = nil, nil
	switch p {
	case SotW:
		if c.SotW, err = ads.OpenSotW(ctx, conn, opts); err != nil {
			break
		}
		c.SotW.Receive(nil)
		for _, typeURL := range first {
			names := []string{"*"}
			if c.Kind == Legacy {
				names = nil
			}
			if err = c.SotW.Subscribe(typeURL, names); err != nil {
				break
			}
		}
	case Delta:
		if c.Delta, err = ads.OpenDelta(ctx, conn, opts); err != nil {
			break
		}
		c.Delta.Receive(nil)
		for _, typeURL := range first {
			var names []string
			if c.Kind != Legacy {
				names = []string{"*"}
			}
			if err = c.Delta.Subscribe(typeURL, names, nil); err != nil {
				break
			}
		}
	}
	if err == nil && c.Kind == Watch && len(c.watched) > 0 {
		err = c.subscribe(c.watched, nil)
	}
	if err != nil {
		cancel()
	}
	return err
}

// subscribe changes a Watch client's ClusterLoadAssignment names.
func (c *Client) subscribe(add, remove []string) error {
	if c.SotW != nil {
		return c.SotW.Subscribe(resourcev3.EndpointType, c.watched)
	}
	return c.Delta.Subscribe(resourcev3.EndpointType, add, remove)
}

// Rewatch makes a Watch client watch clusters instead of what it watched.
func (c *Client) Rewatch(clusters []string) error {
	var add, remove []string
	for _, n := range clusters {
		if !slices.Contains(c.watched, n) {
			add = append(add, n)
		}
	}
	for _, n := range c.watched {
		if !slices.Contains(clusters, n) {
			remove = append(remove, n)
		}
	}
	c.watched = slices.Clone(clusters)
	if len(add) == 0 && len(remove) == 0 {
		return nil
	}
	return c.subscribe(add, remove)
}

// Sees restricts a fresh client's view (a FollowAll client's) to what c
// subscribes to: a Legacy client has no listeners or routes, a Watch
// client only its clusters' ClusterLoadAssignments.
func (c *Client) Sees(all Served) Served {
	out := Served{}
	for typeURL, byName := range all {
		switch {
		case c.Kind == FollowAll:
		case c.Kind == Legacy && (typeURL == resourcev3.ClusterType || typeURL == resourcev3.EndpointType):
		case c.Kind == Watch && typeURL == resourcev3.EndpointType:
			out[typeURL] = map[string]string{}
			for _, n := range c.watched {
				if v, ok := byName[n]; ok {
					out[typeURL][n] = v
				}
			}
			continue
		default:
			continue
		}
		out[typeURL] = maps.Clone(byName)
	}
	return out
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

// held is what the client holds that a client of its kind must hold as
// want says: a SotW client that watches ClusterLoadAssignments by name
// without their Clusters keeps one whose cluster was removed, as SotW
// EDS conveys no removal (a real client drops it with the Cluster), so its
// names absent from want are left out.
func (c *Client) held(want Served) Served {
	got := c.Served()
	if c.Kind == Watch && c.SotW != nil {
		maps.DeleteFunc(got[resourcev3.EndpointType], func(name, _ string) bool {
			_, ok := want[resourcev3.EndpointType][name]
			return !ok
		})
	}
	return got
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
	if c.SotW != nil {
		if err := c.open(SotW); err != nil {
			c.h.T.Fatalf("client %s: reconnect: %v", c.Name, err)
		}
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	d, err := c.Delta.Resume(ctx, c.h.dial(), nil)
	if err != nil {
		cancel()
		c.h.T.Fatalf("client %s: resume: %v", c.Name, err)
	}
	c.Delta, c.cancel = d, cancel
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
	want = c.Sees(want)
	err := c.wait(ctx, func() error {
		if d := want.Diff(c.held(want)); d != "" {
			return fmt.Errorf("%s", d)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("client %s (%s, %s) does not hold what a fresh pipeline serves within %s:\n%w", c.Name, c.Protocol(), c.Kind, timeout, err)
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
