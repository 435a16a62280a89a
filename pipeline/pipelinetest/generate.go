package pipelinetest

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
)

// Sequence is a generated run of the differential: a pipeline's options
// and the events played on it. An event is a group of steps that only
// make sense together (a registry restart and its new watcher's relist):
// shrinking drops whole events.
type Sequence struct {
	Seed    uint64
	Options Options
	Events  [][]Step
}

// Steps returns the sequence's steps in order.
func (q Sequence) Steps() []Step {
	var out []Step
	for _, e := range q.Events {
		out = append(out, e...)
	}
	return out
}

// String renders the sequence's options and steps as Go source.
func (q Sequence) String() string {
	s := fmt.Sprintf("seed %d: registries %v, conflictPolicy %q, endpoints %q, outage %+v, debounce %s\n",
		q.Seed, names(q.Options.Registries), q.Options.ConflictPolicy, q.Options.Endpoints, q.Options.Outage, q.Options.Debounce)
	for _, st := range q.Steps() {
		s += "\t" + st.String() + ",\n"
	}
	return s
}

func names(rcs []RegistryConfig) []string {
	out := make([]string, len(rcs))
	for i, rc := range rcs {
		out[i] = rc.Name
	}
	return out
}

// Generation's vocabulary: few hosts, addresses and ports, so that hosts
// are shared by several registries (merges, takeovers, collisions) and the
// same address appears under several registries and ports, as several
// instances of one machine on their own ports do; "H0" is h0's case
// variant, "h-3" and "H_3" differ in case and in "_" and "-" (each pair is
// one host: a registry's services that make one host merge); "localhost"
// is an instance registered by hostname (Spring Cloud Consul's default),
// which makes its host DNS (translate's rule 2) and which direct xDS
// serves as the addresses it resolves to.
var (
	genServices  = []string{"h0", "h1", "h2", "H0", "h-3", "H_3"}
	genRegistry  = []string{"a", "b", "c"}
	genAddresses = []string{"10.0.0.1", "10.0.0.2", "10.0.0.3", "10.0.0.4", "10.0.0.5", "localhost"}
	genWeights   = []uint32{0, 1, 3, 100}
	genLocality  = []string{"", "r1/z1/", "r2/z1/s1"}
	// genDeclared are the declared port sets a service may have: they
	// agree on shared ports, disagree on the primary one, or share none.
	genDeclared = [][]registries.Port{
		{{Number: 8080, Protocol: "grpc"}},
		{{Number: 8080, Protocol: "grpc"}, {Number: 9090, Protocol: "http"}},
		{{Number: 9090, Protocol: "http"}},
		{{Number: 8080, Protocol: "http"}},
	}
	// genUndeclared are the usual port of a service that declares none and
	// the protocol its instances usually declare; genOwnPorts the ports its
	// instances may listen on instead; genProtocols what an instance may
	// declare instead.
	genUndeclared = []registries.Port{{Number: 8080, Protocol: "grpc"}, {Number: 7070, Protocol: "http"}}
	genOwnPorts   = []uint32{7070, 8080, 9090, 34855, 35499}
	genProtocols  = []string{"grpc", "http", ""}
)

// genService is the generator's model of one registry service.
type genService struct {
	name      string
	declared  []registries.Port // nil: ports come from the instances
	undecl    registries.Port   // the instances' port and usual protocol when nothing is declared
	instances map[string]registries.Instance
}

func (g *genService) service() registries.Service {
	svc := registries.Service{Name: g.name, Ports: g.declared}
	for _, id := range slices.Sorted(maps.Keys(g.instances)) {
		svc.Instances = append(svc.Instances, g.instances[id])
	}
	return svc
}

// generator builds a Sequence from a seed.
type generator struct {
	r *rand.Rand
	// regs: configured registry → service name → service; order is the
	// configuration order.
	regs  map[string]map[string]*genService
	order []string
	// shapes: registry → service name → whether it declares its ports,
	// and the port and protocol of its instances when it does not, fixed
	// for the whole sequence (see Generate).
	shapes map[string]map[string]*registries.Port
	// clients are the names of the clients connected so far; watchers
	// those of the Watch clients.
	clients, watchers []string
	q                 Sequence
	// eureka: the Eureka registries (RegistryConfig.Eureka), by name, with
	// the generator's model of their servers.
	eureka map[string]*genEureka
}

// Generate returns the sequence of seed: 2-3 registries, a conflict
// policy, an endpoint mode, an outage policy and a debounce, and n events
// over a few hosts: instances added, removed, reweighted, relabelled and
// moved between ports; services added and removed; read errors of a
// service or a whole registry's listing, and outages of a whole registry;
// reads after a service's own index reset and relists after reconnections
// (held down);
// reloads that add, remove or restart a registry; time passing; delete
// guards confirmed; clients connecting and reconnecting (Delta with
// initial_resource_versions); and Checks.
//
// The instances of a service that declares no port listen on ports of
// their own (the syncer's rule 3 keeps the host's port while they come and
// go, and the oracle is given the ports kept, as a restarted bridge is), and
// the protocols they declare vary (the protocol follows the instances, so a
// running and a fresh bridge agree on it). Whether a service declares its
// ports, and its usual port when it does not, is fixed for the whole
// sequence, not only for the service's life: a removal the delete guard
// holds keeps the service's history in the Syncer, and the service may be
// listed again before the guard lets go. A service that declares its ports
// has no history and its declared ports change freely. Rule 10's
// hysteresis (inline ↔ WorkloadEntry form near the size limits) is out of
// reach of these sizes.
//
// Every step reaches the pipeline through its registry's Reporter (Step),
// as a real watcher's observations do: a new service is listed before it
// is read, a removal comes inside a listing, Synced is the Reporter's.
func Generate(seed uint64, n int) Sequence {
	g := &generator{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), regs: map[string]map[string]*genService{},
		shapes: map[string]map[string]*registries.Port{}}
	g.q.Seed = seed
	nregs := 2 + g.r.IntN(2)
	for _, name := range genRegistry[:nregs] {
		g.regs[name] = map[string]*genService{}
		g.order = append(g.order, name)
		g.q.Options.Registries = append(g.q.Options.Registries, RegistryConfig{Name: name})
	}
	g.q.Options.ConflictPolicy = pickOf(g.r, []string{syncer.ConflictMerge, syncer.ConflictFirst})
	g.q.Options.Endpoints = pickOf(g.r, []translate.EndpointMode{translate.EndpointsWorkloadEntry, translate.EndpointsInline})
	if g.r.IntN(2) == 0 {
		g.q.Options.Outage.HoldDown = 10 * time.Second
	}
	if g.r.IntN(2) == 0 {
		g.q.Options.Outage.MaxDeleteRatio = 0.5
		g.q.Options.Outage.DeleteGuardFloor = 1
		g.q.Options.Outage.DeleteGuardTimeout = time.Minute
	}
	g.q.Options.Debounce = pickOf(g.r, []time.Duration{0, 0, 2 * time.Millisecond, 20 * time.Millisecond})
	// Half the seeds make their last registry a Eureka one, decided apart
	// from g.r so that the other half play the sequences they always did.
	g.eureka = map[string]*genEureka{}
	if er := rand.New(rand.NewPCG(seed^0xe17e4a, seed)); er.IntN(2) == 0 {
		last := &g.q.Options.Registries[len(g.q.Options.Registries)-1]
		last.Eureka, last.Type = true, "eureka"
		g.eureka[last.Name] = &genEureka{apps: map[string]map[string]eurekatest.Instance{}}
	}

	// Every registry lists first; two clients watch from the start.
	for _, name := range g.order {
		if g.eureka[name] != nil {
			g.event(g.eurekaFirst(name)...)
			continue
		}
		g.event(g.list(name, false)...)
	}
	g.event(g.connect(SotW), g.connect(Delta))
	for range n {
		g.step()
	}
	return g.q
}

func pickOf[T any](r *rand.Rand, xs []T) T { return xs[r.IntN(len(xs))] }

func (g *generator) event(steps ...Step) { g.q.Events = append(g.q.Events, steps) }

// step generates one event.
func (g *generator) step() {
	reg := pickOf(g.r, g.order)
	p := g.r.IntN(100)
	if g.eureka[reg] != nil && p < 66 {
		// A Eureka registry's own events replace a scripted one's reads,
		// failures, relists and restarts.
		g.event(g.eurekaEvent(reg, p >= 62)...)
		return
	}
	switch {
	case p < 40:
		g.event(g.change(reg))
	case p < 48:
		if names := slices.Sorted(maps.Keys(g.regs[reg])); len(names) > 0 {
			name := pickOf(g.r, names)
			delete(g.regs[reg], name)
			g.event(Remove(reg, name))
		}
	case p < 54:
		switch g.r.IntN(3) {
		case 0:
			g.event(Fail(reg, pickOf(g.r, genServices)))
		case 1:
			g.event(Fail(reg, ""))
		default:
			g.event(Down(reg))
		}
	case p < 62:
		// A reconnection: the registry's state may have changed
		// meanwhile, and the relist reads it.
		for range g.r.IntN(3) {
			g.mutate(reg)
		}
		g.event(g.list(reg, true)...)
	case p < 66:
		for range g.r.IntN(2) {
			g.mutate(reg)
		}
		g.event(append([]Step{RestartRegistry(reg)}, g.list(reg, true)...)...)
	case p < 69:
		if len(g.order) > 1 {
			g.order = slices.DeleteFunc(g.order, func(n string) bool { return n == reg })
			delete(g.regs, reg)
			delete(g.eureka, reg)
			g.event(RemoveRegistry(reg))
		}
	case p < 72:
		for _, name := range genRegistry {
			if g.regs[name] == nil {
				g.regs[name] = map[string]*genService{}
				g.order = append(g.order, name)
				for range 1 + g.r.IntN(2) {
					g.mutate(name)
				}
				g.event(append([]Step{AddRegistry(name)}, g.list(name, false)...)...)
				break
			}
		}
	case p < 78:
		g.event(Advance(time.Duration(1+g.r.IntN(15)) * time.Second))
	case p < 80:
		g.event(Confirm(reg))
	case p < 85:
		if len(g.clients) > 0 {
			g.event(Reconnect(pickOf(g.r, g.clients)))
		}
	case p < 86:
		g.event(g.connect(Protocol(g.r.IntN(2))))
	case p < 87:
		p := Protocol(g.r.IntN(2))
		name := fmt.Sprintf("%s-legacy-%d", p, len(g.clients))
		g.clients = append(g.clients, name)
		g.event(ConnectKind(name, p, Legacy))
	case p < 88:
		p := Protocol(g.r.IntN(2))
		name := fmt.Sprintf("%s-watch-%d", p, len(g.clients))
		g.clients = append(g.clients, name)
		g.watchers = append(g.watchers, name)
		g.event(ConnectKind(name, p, Watch, g.clusters()...))
	case p < 90:
		if len(g.watchers) > 0 {
			g.event(Rewatch(pickOf(g.r, g.watchers), g.clusters()...))
		}
	case p < 93:
		// A traffic policy for a generated host, or for all of them.
		host := "*.service.consul"
		if g.r.IntN(4) > 0 {
			host = strings.ReplaceAll(strings.ToLower(pickOf(g.r, genServices)), "_", "-") + ".service.consul"
		}
		g.event(SetPolicyStep(host, Policy(g.r.IntN(int(numPolicies)))))
	default:
		g.event(Check())
	}
}

// clusters picks a few cluster names a Watch client watches: of the
// generated hosts and ports, existing or not.
func (g *generator) clusters() []string {
	var out []string
	for range g.r.IntN(4) {
		host := strings.ReplaceAll(strings.ToLower(pickOf(g.r, genServices)), "_", "-")
		// Now and then a subset's cluster (pipelinetest.Subsets).
		subset := pickOf(g.r, []string{"", "", "v1", "v2"})
		out = append(out, fmt.Sprintf("outbound|%d|%s|%s.service.consul", pickOf(g.r, genOwnPorts), subset, host))
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func (g *generator) connect(p Protocol) Step {
	name := fmt.Sprintf("%s-%d", p, len(g.clients))
	g.clients = append(g.clients, name)
	return Connect(name, p)
}

// list is a complete read of reg (relist: after a reconnection).
func (g *generator) list(reg string, relist bool) []Step {
	var svcs []registries.Service
	for _, name := range slices.Sorted(maps.Keys(g.regs[reg])) {
		svcs = append(svcs, g.regs[reg][name].service())
	}
	if relist {
		return []Step{Relist(reg, svcs...)}
	}
	return []Step{List(reg, svcs...)}
}

// change mutates one service of reg and returns its read, now and then
// one after its own query's index went backwards (SetRelist).
func (g *generator) change(reg string) Step {
	svc := g.mutate(reg)
	if g.r.IntN(8) == 0 {
		return SetRelist(reg, svc.service())
	}
	return Set(reg, svc.service())
}

// mutate changes one service of reg, creating it when needed, and returns
// it.
func (g *generator) mutate(reg string) *genService {
	name := pickOf(g.r, genServices)
	svc := g.regs[reg][name]
	if svc == nil {
		svc = &genService{name: name, instances: map[string]registries.Instance{}}
		if g.shapes[reg] == nil {
			g.shapes[reg] = map[string]*registries.Port{}
		}
		shape, known := g.shapes[reg][name]
		if !known {
			if g.r.IntN(3) == 0 {
				shape = &genUndeclared[g.r.IntN(len(genUndeclared))]
			}
			g.shapes[reg][name] = shape
		}
		if shape == nil {
			svc.declared = pickOf(g.r, genDeclared)
		} else {
			svc.undecl = *shape
		}
		g.regs[reg][name] = svc
		g.addInstance(svc)
		return svc
	}
	ids := slices.Sorted(maps.Keys(svc.instances))
	switch p := g.r.IntN(10); {
	case p < 3 || len(ids) == 0:
		g.addInstance(svc)
	case p < 5:
		// The last one too: a service without instances keeps its host's
		// port and protocol while it is listed.
		delete(svc.instances, pickOf(g.r, ids))
	case p < 6:
		inst := svc.instances[pickOf(g.r, ids)]
		inst.Weight = pickOf(g.r, genWeights)
		svc.instances[inst.ID] = inst
	case p < 7:
		inst := svc.instances[pickOf(g.r, ids)]
		inst.Labels = map[string]string{"version": pickOf(g.r, []string{"v1", "v2"})}
		svc.instances[inst.ID] = inst
	case p < 8:
		inst := svc.instances[pickOf(g.r, ids)]
		inst.Locality = pickOf(g.r, genLocality)
		svc.instances[inst.ID] = inst
	case p < 9:
		inst := svc.instances[pickOf(g.r, ids)]
		if svc.declared != nil || g.r.IntN(2) == 0 {
			// Moved to another port (the same instance ID).
			inst.Port = g.port(svc)
		} else {
			// Declares another protocol, or none.
			inst.Protocol = pickOf(g.r, genProtocols)
		}
		svc.instances[inst.ID] = inst
	default:
		if svc.declared != nil {
			svc.declared = pickOf(g.r, genDeclared)
		}
	}
	return svc
}

// port picks an instance port for svc: one it declares, sometimes one it
// does not (mapped to its primary port); with nothing declared, its usual
// port or, as often, one of its own.
func (g *generator) port(svc *genService) uint32 {
	if svc.declared == nil {
		if g.r.IntN(2) == 0 {
			return pickOf(g.r, genOwnPorts)
		}
		return svc.undecl.Number
	}
	if g.r.IntN(5) == 0 {
		return 7070
	}
	return pickOf(g.r, svc.declared).Number
}

// addInstance adds an instance to svc, of an ID new to it: an address may
// serve the service on several ports.
func (g *generator) addInstance(svc *genService) {
	addr := pickOf(g.r, genAddresses)
	port := g.port(svc)
	inst := registries.Instance{ID: fmt.Sprintf("%s:%d", addr, port), Address: addr, Port: port,
		Weight: pickOf(g.r, genWeights), Locality: pickOf(g.r, genLocality)}
	if svc.declared == nil {
		inst.Protocol = svc.undecl.Protocol
		if g.r.IntN(4) == 0 {
			inst.Protocol = pickOf(g.r, genProtocols)
		}
	}
	svc.instances[inst.ID] = inst
}
