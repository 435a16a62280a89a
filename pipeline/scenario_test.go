package pipeline_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/pipeline/pipelinetest"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
)

// scenario is a named sequence of steps played on a pipeline of the given
// registries, in both conflict policies and both endpoint modes unless it
// names some; each Check, and the end, compares every client and the Store
// with a freshly built pipeline fed the registries' truth, and each Expect
// checks the endpoints the scenario is about.
type scenario struct {
	name string
	// registries are the configured registries, in order (default "a"
	// and "b", consul-typed).
	registries []pipelinetest.RegistryConfig
	outage     syncer.OutagePolicy
	policies   []string
	modes      []translate.EndpointMode
	// stateDir: with a state dir; syncTimeout: sync.timeout (fake clock).
	stateDir    bool
	syncTimeout time.Duration
	steps       []pipelinetest.Step
}

// The scenarios' notation: a service S(name, declared ports, instances...),
// a port P(number, protocol), an instance I{Addr, Port, ...}; the steps are
// pipelinetest's.
var (
	S = pipelinetest.S
	P = pipelinetest.P
)

type I = pipelinetest.I

var (
	grpc8080 = []registries.Port{P(8080, "grpc")}
	// guard holds a listing that removes half of a registry, for an hour.
	guard = syncer.OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardTimeout: time.Hour}
	// holdDown holds a disappearance read after a reconnection for 10s.
	holdDown = syncer.OutagePolicy{HoldDown: 10 * time.Second}
	// The clients every scenario starts with.
	clients = []pipelinetest.Step{pipelinetest.Connect("sotw", pipelinetest.SotW), pipelinetest.Connect("delta", pipelinetest.Delta)}
	// web8080 is the cluster of host web on port 8080 (consul's host template).
	web8080 = "outbound|8080||web.service.consul"
	// webAPIDB are three services of an instance each; a listing of api
	// alone removes two thirds of them.
	api      = S("api", grpc8080, I{Addr: "10.0.0.2", Port: 8080})
	webAPIDB = []registries.Service{S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}), api, S("db", grpc8080, I{Addr: "10.0.0.3", Port: 8080})}
	// orders8080 is the cluster of host orders-service on port 8080,
	// orders35499 on port 35499.
	orders8080  = "outbound|8080||orders-service.service.consul"
	orders35499 = "outbound|35499||orders-service.service.consul"
)

// steps joins step lists.
func steps(parts ...[]pipelinetest.Step) []pipelinetest.Step {
	var out []pipelinetest.Step
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func do(s ...pipelinetest.Step) []pipelinetest.Step { return s }

// many is n instances 10.1.<i/250>.<i%250+1>:port.
func many(n int, port uint32) []I {
	out := make([]I, n)
	for i := range out {
		out[i] = I{Addr: fmt.Sprintf("10.1.%d.%d", i/250, i%250+1), Port: port}
	}
	return out
}

var scenarios = []scenario{
	{
		name: "takeover when the winner's service leaves",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Remove("a", "web"),
			pipelinetest.Expect(web8080, "10.0.0.2:8080"))),
	},
	{
		name: "takeover when the winner's registry leaves by reload",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.RemoveRegistry("a"),
			pipelinetest.Expect(web8080, "10.0.0.2:8080"))),
	},
	{
		name:   "takeover when the delete guard's removal of the winner is confirmed",
		outage: guard,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}, I{Addr: "10.0.0.3", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.RemoveRegistry("a"),
			pipelinetest.Confirm("a"),
			pipelinetest.Expect(web8080, "10.0.0.2:8080"))),
	},
	{
		name: "the non-winner leaves",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Under(syncer.ConflictMerge, pipelinetest.Expect(web8080, "10.0.0.1:8080", "10.0.0.2:8080")),
			pipelinetest.Under(syncer.ConflictFirst, pipelinetest.Expect(web8080, "10.0.0.1:8080")),
			pipelinetest.Remove("b", "web"),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"))),
	},
	{
		name: "a protocol conflict starts and ends",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", []registries.Port{P(8080, "http")}, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Check(),
			pipelinetest.Set("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080})),
			pipelinetest.Under(syncer.ConflictMerge, pipelinetest.Expect(web8080, "10.0.0.1:8080", "10.0.0.2:8080")),
			pipelinetest.Check(),
			pipelinetest.Set("b", S("web", []registries.Port{P(8080, "http")}, I{Addr: "10.0.0.2", Port: 8080})),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"))),
	},
	{
		// The first registry declares no instance; the third's service
		// agrees with it on the port they share: whichever registry is read
		// first, the host serves the third's instance under merge, and
		// none of it under first.
		name:       "a start whose later registry is read first",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		steps: steps(do(
			pipelinetest.List("c", S("h0", []registries.Port{P(9090, "http")}, I{Addr: "10.0.0.1", Port: 9090})),
			pipelinetest.List("b"),
			pipelinetest.List("a", S("h0", []registries.Port{P(8080, "grpc"), P(9090, "http")}))), clients, do(
			pipelinetest.Under(syncer.ConflictMerge, pipelinetest.Expect("outbound|9090||h0.service.consul", "10.0.0.1:9090")),
			pipelinetest.Under(syncer.ConflictFirst, pipelinetest.Expect("outbound|9090||h0.service.consul")))),
	},
	{
		name:       "a start whose first registry is read first",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		steps: steps(do(
			pipelinetest.List("a", S("h0", []registries.Port{P(8080, "grpc"), P(9090, "http")})),
			pipelinetest.List("b"),
			pipelinetest.List("c", S("h0", []registries.Port{P(9090, "http")}, I{Addr: "10.0.0.1", Port: 9090}))), clients, do(
			pipelinetest.Under(syncer.ConflictMerge, pipelinetest.Expect("outbound|9090||h0.service.consul", "10.0.0.1:9090")),
			pipelinetest.Under(syncer.ConflictFirst, pipelinetest.Expect("outbound|9090||h0.service.consul")))),
	},
	{
		// Past the CRD's 4,096 endpoints an inline service is written as
		// WorkloadEntries; back under 90 % of the limit, inline again. (In
		// WorkloadEntry mode there is no form to change.)
		name:       "inline and WorkloadEntry form across the size limit",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		modes:      []translate.EndpointMode{translate.EndpointsInline},
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}))), clients, do(
			pipelinetest.Set("a", S("web", grpc8080, many(translate.MaxInlineEndpoints+1, 8080)...)),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080})),
			pipelinetest.Expect(web8080, "10.0.0.2:8080"))),
	},
	{
		name:       "hold-down, then a real disappearance",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     holdDown,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}), S("api", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Relist("a", S("api", grpc8080, I{Addr: "10.0.0.2", Port: 8080})),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Advance(11*time.Second),
			pipelinetest.Check())),
	},
	{
		name:       "hold-down, then the service is back",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     holdDown,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}))), clients, do(
			pipelinetest.SetRelist("a", S("web", grpc8080)),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.SetRelist("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.Advance(11*time.Second),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"))),
	},
	{
		name:       "the delete guard engages, then is confirmed",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     guard,
		steps: steps(do(
			pipelinetest.List("a", webAPIDB...)), clients, do(
			pipelinetest.Relist("a", api),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Confirm("a"),
			pipelinetest.Check())),
	},
	{
		name:       "the delete guard engages, then times out",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     guard,
		steps: steps(do(
			pipelinetest.List("a", webAPIDB...)), clients, do(
			pipelinetest.Relist("a", api),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Advance(time.Hour+time.Second),
			pipelinetest.Check())),
	},
	{
		name:       "the delete guard engages, then the services are listed again",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     guard,
		steps: steps(do(
			pipelinetest.List("a", webAPIDB...)), clients, do(
			pipelinetest.Relist("a", api),
			pipelinetest.Relist("a", S("web", grpc8080, I{Addr: "10.0.0.4", Port: 8080}), api, webAPIDB[2]),
			pipelinetest.Expect(web8080, "10.0.0.4:8080"))),
	},
	{
		// A removal reaches the Syncer inside a listing (the Reporter's rule
		// 3), so the delete guard judges a single service's deregistration
		// too: one that takes most of the registry's instances waits.
		name:       "a deregistration that removes most of the registry waits for the delete guard",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     guard,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}, I{Addr: "10.0.0.3", Port: 8080}), api)), clients, do(
			pipelinetest.Remove("a", "web"),
			pipelinetest.Holding("a", 1, 0),
			pipelinetest.Expect(web8080, "10.0.0.1:8080", "10.0.0.3:8080"),
			pipelinetest.Confirm("a"),
			pipelinetest.Check())),
	},
	{
		// After an outage (Reporter.Down) the relist's removal is marked
		// Relist and held down; the service still listed stays.
		name:       "an outage, then a relist that lost a service",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     holdDown,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}), api)), clients, do(
			pipelinetest.Down("a"),
			pipelinetest.Relist("a", api),
			pipelinetest.Holding("a", 0, 1),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Advance(11*time.Second),
			pipelinetest.Check())),
	},
	{
		// A failed read marks the service's next read Relist (the
		// Reporter's rule 5): an empty list read next is held down.
		name:       "an empty read after a failed read is held down",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		outage:     holdDown,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}))), clients, do(
			pipelinetest.Fail("a", "web"),
			pipelinetest.Set("a", S("web", grpc8080)),
			pipelinetest.Holding("a", 0, 1),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Advance(11*time.Second),
			pipelinetest.Expect(web8080),
			pipelinetest.Check())),
	},
	{
		name:        "a start from the persisted listing, then the registry's relist",
		registries:  []pipelinetest.RegistryConfig{{Name: "a"}},
		stateDir:    true,
		syncTimeout: 5 * time.Second,
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}), S("api", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.RestartBridge(),
			pipelinetest.Advance(6*time.Second),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Relist("a", S("web", grpc8080, I{Addr: "10.0.0.3", Port: 8080})),
			pipelinetest.Expect(web8080, "10.0.0.3:8080"))),
	},
	{
		name: "a reload renames the hosts (hostTemplate)",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Reload(pipelinetest.RegistryConfig{Name: "a", HostTemplate: "{{.Service}}.mesh"}),
			pipelinetest.Relist("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.Expect("outbound|8080||web.mesh", "10.0.0.1:8080"),
			pipelinetest.Expect(web8080, "10.0.0.2:8080"))),
	},
	{
		name: "ports change",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", []registries.Port{P(9090, "grpc")}, I{Addr: "10.0.0.1", Port: 9090})),
			pipelinetest.Check(),
			pipelinetest.Set("b", S("web", []registries.Port{P(9090, "grpc")}, I{Addr: "10.0.0.2", Port: 9090})))),
	},
	{
		name:       "DNS resolution",
		registries: []pipelinetest.RegistryConfig{{Name: "a", Resolution: model.ResolutionDNS}, {Name: "b", Resolution: model.ResolutionDNS}},
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "web-1.example.com", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "web-2.example.com", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", grpc8080, I{Addr: "web-3.example.com", Port: 8080})))),
	},
	{
		name:       "instances 0 and back",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}))), clients, do(
			pipelinetest.Set("a", S("web", grpc8080)),
			pipelinetest.Expect(web8080),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080})),
			pipelinetest.Expect(web8080, "10.0.0.2:8080"))),
	},
	{
		// Rule 3: the protocol follows the instances, so that a bridge
		// running since before the change serves what a fresh one does.
		name:       "an instance starts and stops declaring http (no declared ports)",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		steps: steps(do(
			pipelinetest.List("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "http"})),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"))),
	},
	{
		name: "a registry's instances turn to the protocol another registry's declare for the host",
		steps: steps(do(
			pipelinetest.List("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080})),
			pipelinetest.List("b", S("web", nil, I{Addr: "10.0.0.2", Port: 8080, Protocol: "http"}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "http"})),
			pipelinetest.Check(),
			pipelinetest.Set("b", S("web", nil, I{Addr: "10.0.0.2", Port: 8080, Protocol: "grpc"})))),
	},
	{
		// Rule 1: a registry's services that make one host are merged, so
		// that a newcomer whose name sorts first (upper case) never takes
		// the host from the service already serving it.
		name:       "a case-variant newcomer joins an established host and leaves it",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}},
		steps: steps(do(
			pipelinetest.List("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "http"}, I{Addr: "10.0.0.2", Port: 8080, Protocol: "http"})),
			pipelinetest.List("b")), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("Orders-Service", nil, I{Addr: "10.0.0.3", Port: 8080, Protocol: "http"})),
			pipelinetest.Expect(orders8080, "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.3:8080"),
			pipelinetest.Check(),
			pipelinetest.Remove("a", "Orders-Service"),
			pipelinetest.Expect(orders8080, "10.0.0.1:8080", "10.0.0.2:8080"),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("Orders-Service", nil, I{Addr: "10.0.0.3", Port: 8080, Protocol: "http"})),
			pipelinetest.Remove("a", "orders-service"),
			pipelinetest.Expect(orders8080, "10.0.0.3:8080"))),
	},
	{
		// Rule 3, the host's ports: instances of one service on their own
		// ports (several on one machine) are served in the cluster of the
		// port kept for the host, through their target ports; a case-variant
		// newcomer whose name sorts first and whose port is lower neither
		// moves that port nor takes an established instance out, and, first
		// listed without instances, does not take the host dark.
		name:       "a case-variant newcomer on its own lower port joins an established host and leaves it",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		steps: steps(do(
			pipelinetest.List("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 35499, Protocol: "http"}, I{Addr: "10.0.0.1", Port: 36807, Protocol: "http"}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Expect(orders35499, "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.Set("a", S("Orders-Service", nil)),
			pipelinetest.Expect(orders35499, "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("Orders-Service", nil, I{Addr: "10.0.0.1", Port: 34855, Protocol: "http"})),
			pipelinetest.Expect(orders35499, "10.0.0.1:34855", "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("Orders-Service", nil)),
			pipelinetest.Expect(orders35499, "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.Check(),
			pipelinetest.Remove("a", "Orders-Service"),
			pipelinetest.Expect(orders35499, "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.Check())),
	},
	{
		// Rule 3 across a restart: the ports kept for the hosts are in the
		// state dir, so the restarted bridge serves the host on its port,
		// though a bridge deciding anew would take the newcomer's lower one.
		name:       "a restarted bridge keeps the host's port (state dir)",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		stateDir:   true,
		steps: steps(do(
			pipelinetest.List("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 35499, Protocol: "http"}, I{Addr: "10.0.0.1", Port: 36807, Protocol: "http"}))), clients, do(
			pipelinetest.Set("a", S("Orders-Service", nil, I{Addr: "10.0.0.1", Port: 34855, Protocol: "http"})),
			pipelinetest.Expect(orders35499, "10.0.0.1:34855", "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.RestartBridge(),
			pipelinetest.List("a", S("Orders-Service", nil, I{Addr: "10.0.0.1", Port: 34855, Protocol: "http"}),
				S("orders-service", nil, I{Addr: "10.0.0.1", Port: 35499, Protocol: "http"}, I{Addr: "10.0.0.1", Port: 36807, Protocol: "http"})),
			pipelinetest.Expect(orders35499, "10.0.0.1:34855", "10.0.0.1:35499", "10.0.0.1:36807"),
			pipelinetest.Check())),
	},
	{
		// Rule 3: the port kept for a host stays while the instance on it
		// leaves and others remain, and a fresh bridge given the kept ports
		// (the state dir) serves it the same.
		name:       "the instance on the host's port leaves, others on their own ports remain",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		steps: steps(do(
			pipelinetest.List("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 35499, Protocol: "http"}, I{Addr: "10.0.0.2", Port: 36807, Protocol: "http"}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("orders-service", nil, I{Addr: "10.0.0.2", Port: 36807, Protocol: "http"}, I{Addr: "10.0.0.3", Port: 34855, Protocol: "http"})),
			pipelinetest.Expect(orders35499, "10.0.0.2:36807", "10.0.0.3:34855"),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("orders-service", nil)),
			pipelinetest.Expect(orders35499),
			pipelinetest.Set("a", S("orders-service", nil, I{Addr: "10.0.0.4", Port: 9090, Protocol: "http"})),
			pipelinetest.Expect(orders35499, "10.0.0.4:9090"),
			pipelinetest.Check())),
	},
	{
		// translate's rule 2 (resolution AUTO): an instance registered by
		// hostname is served, as the addresses it resolves to, beside the IP
		// ones; its host turns DNS and back to STATIC as it comes and goes,
		// also when another registry's service brings it.
		name: "an instance registered by hostname joins and leaves",
		steps: steps(do(
			pipelinetest.List("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "grpc"})),
			pipelinetest.List("b")), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "grpc"}, I{Addr: "localhost", Port: 8081, Protocol: "grpc"})),
			pipelinetest.Check(),
			pipelinetest.Set("b", S("web", nil, I{Addr: "LocalHost", Port: 8082, Protocol: "grpc"})),
			pipelinetest.Set("a", S("web", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "grpc"})),
			pipelinetest.Check(),
			pipelinetest.Remove("b", "web"),
			pipelinetest.Expect(web8080, "10.0.0.1:8080"),
			pipelinetest.Check(),
			pipelinetest.Set("a", S("api", nil, I{Addr: "localhost", Port: 9090, Protocol: "http"})),
			pipelinetest.Check())),
	},
	{
		// The differential's seed 53, shrunk: a winner left without
		// instances has only its history; the ports of the host come from
		// the service that has ports now (another registry's declared ones),
		// as a fresh bridge takes them.
		name:       "the winner empties, a later registry declares the host's port with another protocol",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		steps: steps(do(
			pipelinetest.List("a"),
			pipelinetest.List("c", S("H_3", []registries.Port{P(8080, "http")}, I{Addr: "10.0.0.2", Port: 8080, Weight: 1, Locality: "r2/z1/s1"})),
			pipelinetest.List("b", S("H0", nil, I{Addr: "10.0.0.1", Port: 7070, Weight: 3, Protocol: "http"}), S("h-3", nil, I{Addr: "10.0.0.5", Port: 8080, Weight: 1, Locality: "r2/z1/s1", Protocol: "grpc"}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("b", S("h-3", nil)),
			pipelinetest.Under(syncer.ConflictMerge, pipelinetest.Expect("outbound|8080||h-3.service.consul", "10.0.0.2:8080")),
			pipelinetest.Check())),
	},
	{
		// The differential's seed 21, shrunk: whether a merged service's
		// protocol conflicts is judged on the host's port, as translated for
		// the host, not on a port of its own history (its lowest port moved
		// when an instance joined on a lower one).
		name:       "a merged service gains an instance on a lower port of another protocol",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}, {Name: "c"}},
		steps: steps(do(
			pipelinetest.List("a"),
			pipelinetest.List("c", S("h0", nil, I{Addr: "10.0.0.1", Port: 8080, Weight: 1, Protocol: "http"}, I{Addr: "10.0.0.2", Port: 8080, Weight: 3, Locality: "r1/z1/", Protocol: "grpc"})),
			pipelinetest.List("b", S("h1", []registries.Port{P(8080, "http")}, I{Addr: "10.0.0.4", Port: 8080, Weight: 3, Locality: "r1/z1/"}))), clients, do(
			pipelinetest.Relist("b", S("H0", nil, I{Addr: "10.0.0.2", Port: 7070, Weight: 1, Locality: "r1/z1/", Protocol: "http"}), S("h1", []registries.Port{P(8080, "http")}, I{Addr: "10.0.0.4", Port: 8080, Weight: 3, Locality: "r1/z1/"})),
			pipelinetest.Set("c", S("h0", nil, I{Addr: "10.0.0.1", Port: 8080, Weight: 1, Protocol: "http"}, I{Addr: "10.0.0.2", Port: 8080, Weight: 3, Locality: "r1/z1/", Protocol: "grpc"}, I{Addr: "10.0.0.5", Port: 7070, Weight: 3, Protocol: "grpc"})),
			pipelinetest.Under(syncer.ConflictMerge, pipelinetest.Expect("outbound|8080||h0.service.consul", "10.0.0.1:8080", "10.0.0.2:8080", "10.0.0.2:7070", "10.0.0.5:7070")),
			pipelinetest.Check())),
	},
	{
		// The protocol follows the instances (rule 3) when the service that
		// wins the host has none: a case-variant newcomer that left, still
		// listed, does not keep the host on the protocol its instances
		// served, so the established service's instances, restarted with
		// another protocol, are served, as a fresh bridge serves them (the
		// e2e Spring Nacos test's shape).
		name:       "the established service changes protocol while an empty case variant wins the host",
		registries: []pipelinetest.RegistryConfig{{Name: "a"}},
		steps: steps(do(
			pipelinetest.List("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 35499, Protocol: "http"}, I{Addr: "10.0.0.1", Port: 36807, Protocol: "http"}))), clients, do(
			pipelinetest.Set("a", S("Orders-Service", nil, I{Addr: "10.0.0.1", Port: 34855, Protocol: "http"})),
			pipelinetest.Set("a", S("Orders-Service", nil)),
			pipelinetest.Set("a", S("orders-service", nil)),
			pipelinetest.Set("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 35499, Protocol: "grpc"})),
			pipelinetest.Expect(orders35499, "10.0.0.1:35499"),
			pipelinetest.Check())),
	},
	{
		// Another registry's case variant is merged (merge) or rejected
		// (first) as any other registry's service of the host is.
		name: "a case-variant newcomer of a later registry",
		steps: steps(do(
			pipelinetest.List("a", S("orders-service", nil, I{Addr: "10.0.0.1", Port: 8080, Protocol: "http"})),
			pipelinetest.List("b", S("Orders-Service", nil, I{Addr: "10.0.0.2", Port: 8080, Protocol: "http"}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("Orders-Service", nil, I{Addr: "10.0.0.3", Port: 8080, Protocol: "http"})),
			pipelinetest.Check())),
	},
	{
		name: "a weight changes, nothing else",
		steps: steps(do(
			pipelinetest.List("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080}, I{Addr: "10.0.0.3", Port: 8080})),
			pipelinetest.List("b", S("web", grpc8080, I{Addr: "10.0.0.2", Port: 8080}))), clients, do(
			pipelinetest.Check(),
			pipelinetest.Set("a", S("web", grpc8080, I{Addr: "10.0.0.1", Port: 8080, Weight: 5}, I{Addr: "10.0.0.3", Port: 8080})))),
	},
	{
		// The differential's seed 55, shrunk: a registry removed while the
		// delete guard holds its services and added back takes the place the
		// configuration gives it, not the one it had.
		name:   "a registry added back while the delete guard holds its removal",
		outage: syncer.OutagePolicy{MaxDeleteRatio: 0.5, DeleteGuardFloor: 1, DeleteGuardTimeout: time.Minute},
		steps: steps(do(
			pipelinetest.List("a"),
			pipelinetest.List("b"),
			pipelinetest.Set("a", S("h2", nil, I{ID: "10.0.0.1", Addr: "10.0.0.1", Port: 7070, Weight: 1, Locality: "r1/z1/", Protocol: "http"}, I{ID: "10.0.0.2", Addr: "10.0.0.2", Port: 7070, Protocol: "http"})),
			pipelinetest.RemoveRegistry("a"),
			pipelinetest.AddRegistry("a"),
			pipelinetest.List("a", S("h1", []registries.Port{P(9090, "http")}, I{ID: "10.0.0.3", Addr: "10.0.0.3", Port: 9090})),
			pipelinetest.Set("b", S("h1", []registries.Port{P(8080, "http")}, I{ID: "10.0.0.3", Addr: "10.0.0.3", Port: 7070}))), clients, do(
			pipelinetest.Under(syncer.ConflictFirst, pipelinetest.Expect("outbound|8080||h1.service.consul", "10.0.0.3:7070")))),
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
		regs := sc.registries
		if regs == nil {
			regs = []pipelinetest.RegistryConfig{{Name: "a"}, {Name: "b"}}
		}
		for _, policy := range policies {
			for _, mode := range modes {
				t.Run(sc.name+"/"+policy+"/"+string(mode), func(t *testing.T) {
					t.Parallel()
					opts := pipelinetest.Options{Registries: regs, ConflictPolicy: policy, Endpoints: mode,
						Outage: sc.outage, SyncTimeout: sc.syncTimeout}
					if sc.stateDir {
						opts.StateDir = t.TempDir()
					}
					pipelinetest.NewScene(pipelinetest.Start(t, opts)).Play(sc.steps...)
				})
			}
		}
	}
}
