package pipeline

import (
	"context"
	"fmt"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// ServicePort is every generated instance's port.
const ServicePort = 8080

// Generator is an in-process registry behind registries.Registry: services
// named svc-00000… with instances on distinct addresses, Consul-like
// metadata, listed once and then changed on request (Change, Emit). Its
// first listing is built before Run and released after it is delivered, so
// it is not counted as bridge memory; what the bridge keeps of it (strings
// it references) is.
type Generator struct {
	name      string
	instances int
	listing   []registries.Snapshot
	emits     chan emit
}

// emit asks Run to deliver snap; emitted receives the time the
// Snapshot call began (the event time).
type emit struct {
	snap    registries.Snapshot
	emitted chan time.Time
}

var _ registries.Registry = (*Generator)(nil)

// NewGenerator returns a generator of services × instances, registry "dc1".
func NewGenerator(services, instances int) *Generator {
	g := &Generator{name: "dc1", instances: instances, emits: make(chan emit)}
	g.listing = make([]registries.Snapshot, services)
	for i := range g.listing {
		g.listing[i] = g.Service(i, 0)
	}
	return g
}

// Name implements registries.Registry.
func (g *Generator) Name() string { return g.name }

// Run implements registries.Registry: the listing, Synced, then what Change
// and Emit ask for.
func (g *Generator) Run(ctx context.Context, sink registries.Sink) error {
	for _, s := range g.listing {
		sink.Snapshot(s)
	}
	g.listing = nil
	sink.Synced(g.name)
	for {
		select {
		case <-ctx.Done():
			return nil
		case e := <-g.emits:
			now := time.Now()
			e.snap.Observed = now
			sink.Snapshot(e.snap)
			e.emitted <- now
		}
	}
}

// Change emits service's generation gen (instance 0 moves to another
// address on odd generations) and returns the event time.
func (g *Generator) Change(service, gen int) time.Time { return g.Emit(g.Service(service, gen)) }

// Emit delivers snap to the sink from Run's goroutine, stamped with the
// event time (Observed), and returns that time once the sink took it. The
// snapshot must not be changed afterwards. Run must be running.
func (g *Generator) Emit(snap registries.Snapshot) time.Time {
	e := emit{snap: snap, emitted: make(chan time.Time, 1)}
	g.emits <- e
	return <-e.emitted
}

// Service returns generated service i at generation gen: instance k has
// address number i×instances+k (Address), moved to 11.… for k = 0 on odd
// generations.
func (g *Generator) Service(i, gen int) registries.Snapshot {
	svc := registries.Service{Name: ServiceName(i), Instances: make([]registries.Instance, g.instances)}
	for k := range svc.Instances {
		inst := Instance(i, k, i*g.instances+k)
		if k == 0 && gen%2 == 1 {
			inst.Address = Address(11, i*g.instances+k)
		}
		svc.Instances[k] = inst
	}
	return registries.Snapshot{Registry: g.name, Service: svc, Observed: time.Now()}
}

// ServiceName is the registry name of generated service i.
func ServiceName(i int) string { return fmt.Sprintf("svc-%05d", i) }

// Instance returns instance k of generated service i with address number a
// (distinct numbers below 2^24 give distinct addresses): on ServicePort,
// protocol grpc, weight 1, one of three zones, two labels.
func Instance(i, k, a int) registries.Instance {
	return registries.Instance{
		ID:       fmt.Sprintf("node-%d/svc-%05d-%d", a%50, i, k),
		Address:  Address(10, a),
		Port:     ServicePort,
		Protocol: "grpc",
		Weight:   1,
		Locality: fmt.Sprintf("dc1/zone-%c", 'a'+k%3),
		Labels:   map[string]string{"version": "v1", "env": "bench"},
	}
}

// Address is the IPv4 address first.<a's low 24 bits>.
func Address(first, a int) string {
	return fmt.Sprintf("%d.%d.%d.%d", first, a>>16&255, a>>8&255, a&255)
}
