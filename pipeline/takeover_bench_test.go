package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/pipeline/pipelinetest"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness/ads"
	"github.com/meshbridge/meshbridge/translate"
)

// BenchmarkTakeover measures a takeover from the registry read to the
// client: two registries serve host web (merge), the first one's service
// leaves, and each op is the time until a SotW client holds the second
// one's endpoint alone, with debounce.after 100ms (the default), in both
// endpoint modes. The service comes back between ops (not timed).
func BenchmarkTakeover(b *testing.B) {
	for _, mode := range []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline} {
		b.Run(string(mode), func(b *testing.B) {
			h := pipelinetest.Start(b, pipelinetest.Options{
				Registries:     []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}},
				ConflictPolicy: syncer.ConflictMerge, Endpoints: mode, Debounce: 100 * time.Millisecond,
			})
			web := func(addr string) pipelinetest.Call {
				return pipelinetest.Call{Op: pipelinetest.OpSnapshot, Service: S("web", grpc8080, I{Addr: addr, Port: 8080})}
			}
			h.Do("a", pipelinetest.ListCalls(nil, false)...)
			h.Do("b", pipelinetest.ListCalls(nil, false)...)
			h.Do("a", web("10.0.0.1"))
			h.Do("b", web("10.0.0.2"))
			h.WaitReady()
			c := h.Connect("bench", pipelinetest.SotW)
			holds := func(want ...string) func() error {
				return func() error {
					got := c.Served()[resourcev3.EndpointType][web8080]
					_, eps, err := ads.Endpoints(&anypb.Any{TypeUrl: resourcev3.EndpointType, Value: []byte(got)})
					if err != nil {
						return err
					}
					if fmt.Sprint(eps) != fmt.Sprint(want) {
						return fmt.Errorf("endpoints %v", eps)
					}
					return nil
				}
			}
			wait := func(cond func() error) {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				if err := c.SotW.Wait(ctx, cond); err != nil {
					b.Fatal(err)
				}
			}
			wait(holds("10.0.0.1:8080", "10.0.0.2:8080"))
			b.ResetTimer()
			for range b.N {
				h.Do("a", pipelinetest.Call{Op: pipelinetest.OpRemove, Service: S("web", nil)})
				wait(holds("10.0.0.2:8080"))
				b.StopTimer()
				h.Do("a", web("10.0.0.1"))
				wait(holds("10.0.0.1:8080", "10.0.0.2:8080"))
				b.StartTimer()
			}
		})
	}
}
