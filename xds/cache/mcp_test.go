package cache

import (
	"io"
	"log/slog"
	"testing"
	"testing/synctest"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	cachev3 "github.com/envoyproxy/go-control-plane/pkg/cache/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/stream/v3"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
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
		c := NewMCP(store, slog.New(slog.NewTextHandler(io.Discard, nil)))
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
