package main

import (
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/meshbridge/meshbridge/bench/pipeline"
	"github.com/meshbridge/meshbridge/registries"
)

// Kinds of registry change.
const (
	instanceAdded = iota
	instanceRemoved
	weightChanged
	serviceAdded
	serviceRemoved
	changeKinds
)

var kindNames = [changeKinds]string{"instance added", "instance removed", "weight changed", "service added", "service removed"}

// meshService is one service of the registry as the soak last emitted it.
type meshService struct {
	instances []registries.Instance
	nextK     int // next instance number
	live      int // position in mesh.live
}

// mesh is the registry's content, which the soak changes one service at a
// time and emits through the generator. Only the load goroutine uses it
// while the load runs.
type mesh struct {
	gen       *pipeline.Generator
	rng       *rand.Rand
	instances int     // instances of a new service; a service keeps 1 to 2× as many
	target    int     // services the mesh hovers around
	svcShare  float64 // share of changes that add or remove a service

	services map[int]*meshService
	live     []int              // indices of services, for picking one at random
	next     int                // index of the next new service
	nextAddr int                // address number of the next new instance
	counts   [changeKinds]int64 // by kind; read once the load stopped
	applied  atomic.Int64       // changes the sink took, read while the load runs
}

// newMesh returns the mesh of gen's listing: services × instances as
// gen.Service(i, 0) lists them.
func newMesh(gen *pipeline.Generator, services, instances int, svcShare float64, seed uint64) *mesh {
	m := &mesh{gen: gen, rng: rand.New(rand.NewPCG(seed, seed^0x5eed)), instances: instances, target: services,
		svcShare: svcShare, services: make(map[int]*meshService, services), next: services, nextAddr: services * instances}
	for i := range services {
		m.add(i, gen.Service(i, 0).Service.Instances)
	}
	return m
}

func (m *mesh) add(i int, instances []registries.Instance) {
	m.services[i] = &meshService{instances: instances, nextK: len(instances), live: len(m.live)}
	m.live = append(m.live, i)
}

func (m *mesh) remove(i int) {
	svc := m.services[i]
	last := m.live[len(m.live)-1]
	m.live[svc.live] = last
	m.services[last].live = svc.live
	m.live = m.live[:len(m.live)-1]
	delete(m.services, i)
}

// newInstance returns instance k of service i on a fresh address.
func (m *mesh) newInstance(i, k int) registries.Instance {
	a := m.nextAddr
	m.nextAddr++
	return pipeline.Instance(i, k, a)
}

// change makes one random change and emits it: mostly an instance added,
// removed or reweighted in a random service, with probability svcShare a
// service added or removed (whichever brings the count back to target).
func (m *mesh) change() {
	if m.rng.Float64() < m.svcShare || len(m.live) == 0 {
		if len(m.live) < m.target || (len(m.live) == m.target && m.rng.IntN(2) == 0) || len(m.live) == 0 {
			i := m.next
			m.next++
			insts := make([]registries.Instance, m.instances)
			for k := range insts {
				insts[k] = m.newInstance(i, k)
			}
			m.add(i, insts)
			m.counts[serviceAdded]++
			m.emit(i)
			return
		}
		i := m.live[m.rng.IntN(len(m.live))]
		m.remove(i)
		m.counts[serviceRemoved]++
		m.gen.Emit(registries.Snapshot{Registry: m.gen.Name(), Service: registries.Service{Name: pipeline.ServiceName(i)}, Removed: true})
		m.applied.Add(1)
		return
	}
	i := m.live[m.rng.IntN(len(m.live))]
	svc := m.services[i]
	kind := m.rng.IntN(3)
	switch {
	case kind == instanceRemoved && len(svc.instances) <= 1:
		kind = instanceAdded
	case kind == instanceAdded && len(svc.instances) >= 2*m.instances:
		kind = instanceRemoved
	}
	switch kind {
	case instanceAdded:
		svc.instances = append(svc.instances, m.newInstance(i, svc.nextK))
		svc.nextK++
	case instanceRemoved:
		k := m.rng.IntN(len(svc.instances))
		svc.instances = slices.Delete(svc.instances, k, k+1)
	case weightChanged:
		k := m.rng.IntN(len(svc.instances))
		w := svc.instances[k].Weight
		for w == svc.instances[k].Weight {
			w = 1 + m.rng.Uint32N(200)
		}
		svc.instances[k].Weight = w
	}
	m.counts[kind]++
	m.emit(i)
}

// emit sends service i's instances as they are now; the snapshot gets its
// own copy of the list.
func (m *mesh) emit(i int) {
	m.gen.Emit(registries.Snapshot{Registry: m.gen.Name(), Service: registries.Service{
		Name: pipeline.ServiceName(i), Instances: slices.Clone(m.services[i].instances),
	}})
	m.applied.Add(1)
}
