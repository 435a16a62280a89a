package cache

import (
	"errors"
	"io"
	"log/slog"
	"slices"
	"testing"
	"testing/synctest"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	mcp "istio.io/api/mcp/v1alpha1"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// TestMCPAnswerPendingOnAFullChannelEndsWithItsWatch: an answer that waits
// for room in the stream's response channel is given up when the stream
// cancels the watch, leaving no goroutine behind (synctest fails a test
// that does).
func TestMCPAnswerPendingOnAFullChannelEndsWithItsWatch(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
		if _, err := store.Create(&model.Config{
			Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "mesh", Name: "a", Hash: model.SumHash([]byte("a"))},
			Spec: &networking.ServiceEntry{Hosts: []string{"a.mesh"}, Ports: []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}},
		}); err != nil {
			t.Fatal(err)
		}
		c := NewMCP(store, translate.ValidateConfig, slog.New(slog.NewTextHandler(io.Discard, nil)))
		c.RebuildAll()
		out := make(chan cachev3.Response, 1)
		out <- nil // the stream has not drained its previous response
		req := &discovery.DiscoveryRequest{TypeUrl: "networking.istio.io/v1/ServiceEntry"}
		cancel, err := c.CreateWatch(req, stream.NewSotwSubscription(nil, true), out)
		if err != nil {
			t.Fatal(err)
		}
		cancel()
		synctest.Wait()
		<-out
		select {
		case resp := <-out:
			t.Fatalf("answer %v delivered after its watch was cancelled", resp)
		default:
		}
	})
}

// TestNewMCPRequiresValidate: a cache without its validation panics when
// it is built rather than serve what istiod would drop.
func TestNewMCPRequiresValidate(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("NewMCP accepted a nil validate")
		}
	}()
	NewMCP(serviceentry.NewStore(nil, model.KindServiceEntry), nil, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// TestMCPLeavesOffWhatValidateRefuses: the validation given decides what
// is served; an object it refuses is left off the wire, the others are
// served.
func TestMCPLeavesOffWhatValidateRefuses(t *testing.T) {
	store := serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	for _, name := range []string{"a", "refused"} {
		if _, err := store.Create(&model.Config{
			Meta: model.Meta{Kind: model.KindServiceEntry, Namespace: "mesh", Name: name, Hash: model.SumHash([]byte(name))},
			Spec: &networking.ServiceEntry{Hosts: []string{name + ".mesh"}, Ports: []*networking.ServicePort{{Number: 80, Name: "http", Protocol: "HTTP"}}},
		}); err != nil {
			t.Fatal(err)
		}
	}
	var asked []string
	c := NewMCP(store, func(cfg *model.Config) error {
		asked = append(asked, cfg.Name)
		if cfg.Name == "refused" {
			return errors.New("refused by the test")
		}
		return nil
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	c.RebuildAll()
	out := make(chan cachev3.Response, 1)
	req := &discovery.DiscoveryRequest{TypeUrl: "networking.istio.io/v1/ServiceEntry"}
	if _, err := c.CreateWatch(req, stream.NewSotwSubscription(nil, true), out); err != nil {
		t.Fatal(err)
	}
	resp, err := (<-out).GetDiscoveryResponse()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, a := range resp.GetResources() {
		var r mcp.Resource
		if err := a.UnmarshalTo(&r); err != nil {
			t.Fatal(err)
		}
		names = append(names, r.GetMetadata().GetName())
	}
	slices.Sort(asked)
	if !slices.Equal(names, []string{"mesh/a"}) || !slices.Equal(asked, []string{"a", "refused"}) {
		t.Errorf("served %v after validating %v, want [mesh/a] after validating both", names, asked)
	}
}
