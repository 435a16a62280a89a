package main

import (
	"context"
	"fmt"
	"time"

	"github.com/meshbridge/meshbridge/registries"
)

// servicePort is every generated instance's port.
const servicePort = 8080

// generator is an in-process registry behind registries.Registry: services
// named svc-00000… with instances on distinct addresses, Consul-like
// metadata, listed once and then changed on request. Its first listing is
// built before Run and released after it is delivered, so it is not counted
// as bridge memory; what the bridge keeps of it (strings it references) is.
type generator struct {
	name      string
	services  int
	instances int
	listing   []registries.Snapshot
	changes   chan change
}

// change asks the generator to emit service's snapshot of generation gen;
// emitted receives the time the Snapshot call began (the event time).
type change struct {
	service, gen int
	emitted      chan time.Time
}

var _ registries.Registry = (*generator)(nil)

func newGenerator(services, instances int) *generator {
	g := &generator{name: "dc1", services: services, instances: instances, changes: make(chan change)}
	g.listing = make([]registries.Snapshot, services)
	for i := range g.listing {
		g.listing[i] = g.service(i, 0)
	}
	return g
}

// Name implements registries.Registry.
func (g *generator) Name() string { return g.name }

// Run implements registries.Registry: the listing, Synced, then changes.
func (g *generator) Run(ctx context.Context, sink registries.Sink) error {
	for _, s := range g.listing {
		sink.Snapshot(s)
	}
	g.listing = nil
	sink.Synced(g.name)
	for {
		select {
		case <-ctx.Done():
			return nil
		case c := <-g.changes:
			snap := g.service(c.service, c.gen)
			now := time.Now()
			snap.Observed = now
			sink.Snapshot(snap)
			c.emitted <- now
		}
	}
}

// change emits service's generation gen (instance 0 moves to another
// address on odd generations) and returns the event time.
func (g *generator) change(service, gen int) time.Time {
	c := change{service: service, gen: gen, emitted: make(chan time.Time, 1)}
	g.changes <- c
	return <-c.emitted
}

// service returns generated service i at generation gen.
func (g *generator) service(i, gen int) registries.Snapshot {
	svc := registries.Service{Name: fmt.Sprintf("svc-%05d", i), Instances: make([]registries.Instance, g.instances)}
	for k := range svc.Instances {
		a := i*g.instances + k
		first := 10
		if k == 0 && gen%2 == 1 {
			first = 11
		}
		svc.Instances[k] = registries.Instance{
			ID:       fmt.Sprintf("node-%d/svc-%05d-%d", a%50, i, k),
			Address:  fmt.Sprintf("%d.%d.%d.%d", first, a>>16&255, a>>8&255, a&255),
			Port:     servicePort,
			Protocol: "grpc",
			Weight:   1,
			Locality: fmt.Sprintf("dc1/zone-%c", 'a'+k%3),
			Labels:   map[string]string{"version": "v1", "env": "bench"},
		}
	}
	return registries.Snapshot{Registry: g.name, Service: svc, Observed: time.Now()}
}
