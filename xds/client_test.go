package xds

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// wait bounds every expected receive; no assertion sleeps.
const wait = 10 * time.Second

// sotwClient is a Manual ads.SotW: it sends exactly the requests a test
// writes (send, ack) and hands over each response (next), as the server
// tests pin the answers to them.
type sotwClient struct {
	t *testing.T
	*ads.SotW
	cancel context.CancelFunc
}

func openSotW(t *testing.T, conn *grpc.ClientConn) *sotwClient {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	s, err := ads.OpenSotW(ctx, conn, ads.Options{Manual: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	s.Receive(nil)
	t.Cleanup(func() {
		cancel()
		<-s.Done()
	})
	return &sotwClient{t: t, SotW: s, cancel: cancel}
}

func (c *sotwClient) send(req *discovery.DiscoveryRequest) {
	c.t.Helper()
	if err := c.Send(req); err != nil {
		c.t.Fatalf("send %s: %v", req.GetTypeUrl(), err)
	}
}

// ack ACKs resp, keeping the subscription to names.
func (c *sotwClient) ack(resp *discovery.DiscoveryResponse, names ...string) {
	c.t.Helper()
	c.send(&discovery.DiscoveryRequest{
		TypeUrl: resp.GetTypeUrl(), ResourceNames: names,
		VersionInfo: resp.GetVersionInfo(), ResponseNonce: resp.GetNonce(),
	})
}

// next returns the next response, or fails the test after wait.
func (c *sotwClient) next(t *testing.T) *discovery.DiscoveryResponse {
	t.Helper()
	return nextOf(t, c.Next)
}

// end waits for the stream to end and returns its error; a response
// received first, or a stream still open after wait, fails the test.
func (c *sotwClient) end(t *testing.T) error {
	t.Helper()
	return endOf(t, c.Next)
}

// deltaClient is a Manual ads.Delta, as sotwClient.
type deltaClient struct {
	t *testing.T
	*ads.Delta
	cancel context.CancelFunc
}

func openDelta(t *testing.T, conn *grpc.ClientConn) *deltaClient {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	d, err := ads.OpenDelta(ctx, conn, ads.Options{Manual: true})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	d.Receive(nil)
	t.Cleanup(func() {
		cancel()
		<-d.Done()
	})
	return &deltaClient{t: t, Delta: d, cancel: cancel}
}

func (c *deltaClient) send(req *discovery.DeltaDiscoveryRequest) {
	c.t.Helper()
	if err := c.Send(req); err != nil {
		c.t.Fatalf("send %s: %v", req.GetTypeUrl(), err)
	}
}

// ack ACKs resp.
func (c *deltaClient) ack(resp *discovery.DeltaDiscoveryResponse) {
	c.t.Helper()
	c.send(&discovery.DeltaDiscoveryRequest{TypeUrl: resp.GetTypeUrl(), ResponseNonce: resp.GetNonce()})
}

// next returns the next response, or fails the test after wait.
func (c *deltaClient) next(t *testing.T) *discovery.DeltaDiscoveryResponse {
	t.Helper()
	return nextOf(t, c.Next)
}

// end is sotwClient.end.
func (c *deltaClient) end(t *testing.T) error {
	t.Helper()
	return endOf(t, c.Next)
}

// nextOf returns the next response of a Manual stream, or fails the test
// when the stream ended or nothing came within wait.
func nextOf[T any](t *testing.T, next func(time.Duration) (T, error)) T {
	t.Helper()
	m, err := next(wait)
	switch {
	case errors.Is(err, ads.ErrTimeout):
		t.Fatalf("nothing received within %v", wait)
	case err != nil:
		t.Fatalf("stream ended: %v", err)
	}
	return m
}

// endOf waits for a Manual stream to end and returns its error; a response
// received first, or a stream still open after wait, fails the test.
func endOf[T any](t *testing.T, next func(time.Duration) (T, error)) error {
	t.Helper()
	m, err := next(wait)
	switch {
	case err == nil:
		t.Fatalf("received %v, want the stream to end", m)
	case errors.Is(err, ads.ErrTimeout):
		t.Fatalf("stream still open after %v", wait)
	}
	return err
}

// deltaNames returns the sorted names of the resources in resp.
func deltaNames(resp *discovery.DeltaDiscoveryResponse) []string {
	var names []string
	for _, r := range resp.GetResources() {
		names = append(names, r.GetName())
	}
	slices.Sort(names)
	return names
}

// deltaVersions returns the version of each resource in resp, by name.
func deltaVersions(resp *discovery.DeltaDiscoveryResponse) map[string]string {
	out := make(map[string]string)
	for _, r := range resp.GetResources() {
		out[r.GetName()] = r.GetVersion()
	}
	return out
}

// sorted returns names sorted, nil when empty, for comparisons.
func sorted(names ...string) []string {
	if len(names) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(names))
}

// claAddresses unmarshals a ClusterLoadAssignment and returns its endpoint
// addresses in order.
func claAddresses(t *testing.T, a *anypb.Any) []string {
	t.Helper()
	_, out, err := decodeCLA(a)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// decodeCLA returns a ClusterLoadAssignment's name and endpoint addresses;
// for use off the test goroutine.
func decodeCLA(a *anypb.Any) (string, []string, error) {
	cla := &endpoint.ClusterLoadAssignment{}
	if err := a.UnmarshalTo(cla); err != nil {
		return "", nil, err
	}
	var out []string
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			out = append(out, lb.GetEndpoint().GetAddress().GetSocketAddress().GetAddress())
		}
	}
	return cla.GetClusterName(), out, nil
}
