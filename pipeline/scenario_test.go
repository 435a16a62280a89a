package pipeline_test

import (
	"testing"

	"github.com/meshbridge/meshbridge/pipeline/pipelinetest"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
)

// scenario is a named sequence of steps played on a pipeline of the
// given registries, in both conflict policies and both endpoint modes
// unless it names one; each Check, and the end, compares every client and
// the Store with a freshly built pipeline fed the registries' truth.
type scenario struct {
	name string
	// registries are the configured registries' names, in order
	// (default "a" and "b").
	registries []string
	outage     syncer.OutagePolicy
	policies   []string
	modes      []translate.EndpointMode
	steps      []pipelinetest.Step
}

var grpc8080 = []registries.Port{pipelinetest.P(8080, "grpc")}

// Notation: a service S(name, declared ports, instances...), an instance
// I{Addr, Port, ...}.
var (
	S = pipelinetest.S
	P = pipelinetest.P
)

type I = pipelinetest.I

var scenarios = []scenario{
	{
		name: "takeover when the winner's service leaves",
		steps: []pipelinetest.Step{
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080})),
			pipelinetest.Connect("sotw", pipelinetest.SotW),
			pipelinetest.Connect("delta", pipelinetest.Delta),
			pipelinetest.Check(),
			pipelinetest.Remove("a", "web"),
		},
	},
}

func TestScenarios(t *testing.T) {
	for _, sc := range scenarios {
		policies := sc.policies
		if policies == nil {
			policies = []string{syncer.ConflictMerge, syncer.ConflictFirst}
		}
		modes := sc.modes
		if modes == nil {
			modes = []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline}
		}
		names := sc.registries
		if names == nil {
			names = []string{"a", "b"}
		}
		for _, policy := range policies {
			for _, mode := range modes {
				t.Run(sc.name+"/"+policy+"/"+string(mode), func(t *testing.T) {
					t.Parallel()
					var regs []pipelinetest.RegistryConfig
					for _, n := range names {
						regs = append(regs, pipelinetest.RegistryConfig{Name: n})
					}
					h := pipelinetest.Start(t, pipelinetest.Options{Registries: regs, ConflictPolicy: policy,
						Endpoints: mode, Outage: sc.outage})
					pipelinetest.NewScene(h).Play(sc.steps...)
				})
			}
		}
	}
}
