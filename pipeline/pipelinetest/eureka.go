package pipelinetest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/eureka"
	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
)

// A registry configured with RegistryConfig.Eureka is watched by the real
// Eureka watcher (package registries/eureka) reading a recorded Eureka
// server (eurekatest.Server) that the Eureka steps script: registrations
// and status changes that enter the server's delta or are missed, the delta
// queue emptied, the server failing and answering again, and the watcher's
// rounds (EurekaPoll). The server outlives the watcher (a RestartRegistry
// reads it again) and the bridge (RestartBridge). What the registry lists
// is what a fresh watcher reads of the server (the oracle's truth), so the
// watcher's deltas, hashcode checks and full reads are what the Check
// compares with a fresh bridge.

// eurekaTimeout bounds a scripted round of the watcher.
const eurekaTimeout = 20 * time.Second

// eurekaSide is a Eureka registry's server and its running watcher.
type eurekaSide struct {
	srv *eurekatest.Server
	reg *eureka.Registry // the current watcher
}

// eurekaServer returns the recorded server of registry name, started on
// first use and shared by every harness of the scene (Options.eureka).
func (h *Harness) eurekaServer(name string) *eurekatest.Server {
	if srv := h.opts.eureka.servers[name]; srv != nil {
		return srv
	}
	srv := eurekatest.Start(h.T)
	h.opts.eureka.servers[name] = srv
	return srv
}

// newEurekaWatcher is a Eureka watcher of registry name's server that
// reads only when told (EurekaPoll) and keeps no grace after an outage
// (its clock is the wall's, not the scene's).
func (h *Harness) newEurekaWatcher(name string) *eureka.Registry {
	srv := h.eurekaServer(name)
	log := h.opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	reg, err := eureka.New(eureka.Config{Name: name, Servers: []string{srv.URL()}, Interval: time.Hour,
		RelistInterval: time.Hour, RequestTimeout: 5 * time.Second, Logger: log})
	if err != nil {
		h.T.Fatalf("eureka watcher of %s: %v", name, err)
	}
	h.eurekaRegs[name] = reg
	return reg
}

// eurekaTruth is what a fresh Eureka watcher reads of the server of
// registry name: one full read, its services by name.
func (h *Harness) eurekaTruth(name string) []registries.Service {
	srv := h.eurekaServer(name)
	reg, err := eureka.New(eureka.Config{Name: "oracle-" + name, Servers: []string{srv.TruthURL()}, Interval: time.Hour,
		RelistInterval: time.Hour, RequestTimeout: 5 * time.Second, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		h.T.Fatalf("eureka oracle of %s: %v", name, err)
	}
	services := map[string]registries.Service{}
	sink := registries.SinkFuncs{SnapshotFunc: func(s registries.Snapshot) {
		switch {
		case s.Service.Name == "":
		case s.Removed:
			delete(services, s.Service.Name)
		case s.Err == nil:
			services[s.Service.Name] = s.Service
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), eurekaTimeout)
	defer cancel()
	run, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = reg.Run(run, sink)
	}()
	err = reg.Poll(ctx, true)
	stop()
	<-done
	if err != nil {
		h.T.Fatalf("eureka oracle of %s: %v", name, err)
	}
	var out []registries.Service
	for _, k := range slices.Sorted(maps.Keys(services)) {
		out = append(out, services[k])
	}
	return out
}

// eurekaStep is a step on the recorded server of registry reg.
func eurekaStep(reg, expr string, play func(*Scene, *eurekatest.Server)) Step {
	return registryStep(reg, expr, func(s *Scene) {
		s.H.T.Helper()
		if !s.H.isEureka(reg) {
			s.skip("registry %q is not a Eureka registry", reg)
			return
		}
		play(s, s.H.eurekaServer(reg))
	})
}

// EurekaPut registers or changes an instance on registry reg's server;
// inDelta: the change enters the server's delta (else the watcher missed
// it).
func EurekaPut(reg string, in eurekatest.Instance, inDelta bool) Step {
	return eurekaStep(reg, fmt.Sprintf("pipelinetest.EurekaPut(%q, %#v, %t)", reg, in, inDelta),
		func(_ *Scene, srv *eurekatest.Server) { srv.Put(in, inDelta) })
}

// EurekaDelete deregisters an instance on registry reg's server; inDelta as
// for EurekaPut.
func EurekaDelete(reg, app, id string, inDelta bool) Step {
	return eurekaStep(reg, fmt.Sprintf("pipelinetest.EurekaDelete(%q, %q, %q, %t)", reg, app, id, inDelta),
		func(_ *Scene, srv *eurekatest.Server) { srv.Delete(app, id, inDelta) })
}

// EurekaExpire empties registry reg's server's delta queue (its retention
// window passed).
func EurekaExpire(reg string) Step {
	return eurekaStep(reg, fmt.Sprintf("pipelinetest.EurekaExpire(%q)", reg),
		func(_ *Scene, srv *eurekatest.Server) { srv.Expire() })
}

// EurekaFail makes registry reg's server answer every request with the
// HTTP status code; 0 makes it answer again.
func EurekaFail(reg string, code int) Step {
	return eurekaStep(reg, fmt.Sprintf("pipelinetest.EurekaFail(%q, %d)", reg, code),
		func(_ *Scene, srv *eurekatest.Server) { srv.SetStatus(code) })
}

// EurekaPoll makes registry reg's running watcher read once (eureka
// Registry.Poll): the delta, or the whole registry when one is due or full
// is set (the relistInterval timer's read); it returns once the read's
// snapshots reached the pipeline.
func EurekaPoll(reg string, full bool) Step {
	return eurekaStep(reg, fmt.Sprintf("pipelinetest.EurekaPoll(%q, %t)", reg, full), func(s *Scene, _ *eurekatest.Server) {
		ctx, cancel := context.WithTimeout(context.Background(), eurekaTimeout)
		defer cancel()
		if err := s.H.eurekaRegs[reg].Poll(ctx, full); err != nil {
			s.fail("registry %s: poll: %v", reg, err)
		}
	})
}

// isEureka reports whether registry name is configured as a Eureka one.
func (h *Harness) isEureka(name string) bool {
	return slices.ContainsFunc(h.opts.Registries, func(rc RegistryConfig) bool { return rc.Name == name && rc.Eureka })
}

// eurekaServers are the recorded servers of a scene's Eureka registries,
// by name, shared by every copy of its Options (a reference).
type eurekaServers struct {
	servers map[string]*eurekatest.Server
}

// genEureka is the generator's model of a Eureka registry's server.
type genEureka struct {
	apps    map[string]map[string]eurekatest.Instance // application → ID → instance
	failing bool
}

// Generation's Eureka vocabulary: statuses (UP most often), metadata
// versions and protocols.
var (
	genStatuses       = []string{"UP", "UP", "UP", "DOWN", "OUT_OF_SERVICE", "STARTING"}
	genEurekaProtocol = []string{"", "", "grpc", "http"}
)

// eurekaFirst is a Eureka registry's first event: a few registrations and
// the watcher's first full read.
func (g *generator) eurekaFirst(reg string) []Step {
	var steps []Step
	for range 1 + g.r.IntN(3) {
		steps = append(steps, g.eurekaChange(reg, true))
	}
	return append(steps, EurekaPoll(reg, true))
}

// eurekaEvent is one event of a Eureka registry: registrations,
// deregistrations and changes, entering the delta or missed, then the
// watcher's round (a full read is then due only when a change was missed:
// the timer's; the hashcode finds the others); or the delta queue emptied;
// or the server failing, then answering again at the registry's next
// event; or (restart) a reload that restarts the watcher.
func (g *generator) eurekaEvent(reg string, restart bool) []Step {
	e := g.eureka[reg]
	switch {
	case e.failing:
		e.failing = false
		return []Step{EurekaFail(reg, 0), EurekaPoll(reg, false)}
	case restart:
		return []Step{RestartRegistry(reg), EurekaPoll(reg, false)}
	}
	switch p := g.r.IntN(10); {
	case p < 1:
		e.failing = true
		return []Step{EurekaFail(reg, 503), EurekaPoll(reg, false)}
	case p < 2:
		return []Step{EurekaExpire(reg), EurekaPoll(reg, false)}
	}
	var steps []Step
	missed := false
	for range 1 + g.r.IntN(2) {
		inDelta := g.r.IntN(5) > 0
		missed = missed || !inDelta
		steps = append(steps, g.eurekaChange(reg, inDelta))
	}
	steps = append(steps, EurekaPoll(reg, false))
	if missed {
		steps = append(steps, EurekaPoll(reg, true))
	}
	return steps
}

// eurekaChange changes one application of reg's server: an instance
// registered (several per address, on their own ports; "localhost" one
// registered by name), deregistered, or changed (status, metadata,
// port, secure port).
func (g *generator) eurekaChange(reg string, inDelta bool) Step {
	e := g.eureka[reg]
	app := strings.ToUpper(pickOf(g.r, genServices))
	insts := e.apps[app]
	ids := slices.Sorted(maps.Keys(insts))
	p := g.r.IntN(10)
	if len(ids) == 0 || p < 3 {
		addr := pickOf(g.r, genAddresses)
		port := pickOf(g.r, genOwnPorts)
		in := eurekatest.Instance{App: app, ID: fmt.Sprintf("%s:%s:%d", addr, strings.ToLower(app), port),
			HostName: addr, IPAddr: addr, Status: pickOf(g.r, genStatuses), Port: port, SecurePort: 443}
		if addr == "localhost" {
			in.IPAddr = "" // registered by name: its hostName is served
		}
		if proto := pickOf(g.r, genEurekaProtocol); proto != "" {
			in.Metadata = map[string]string{"protocol": proto}
		}
		if insts == nil {
			insts = map[string]eurekatest.Instance{}
			e.apps[app] = insts
		}
		insts[in.ID] = in
		return EurekaPut(reg, in, inDelta)
	}
	id := pickOf(g.r, ids)
	in := insts[id]
	switch {
	case p < 5:
		delete(insts, id)
		if len(insts) == 0 {
			delete(e.apps, app)
		}
		return EurekaDelete(reg, app, id, inDelta)
	case p < 7:
		in.Status = pickOf(g.r, genStatuses)
	case p < 8:
		in.Metadata = map[string]string{"version": pickOf(g.r, []string{"v1", "v2"})}
		if proto := pickOf(g.r, genEurekaProtocol); proto != "" {
			in.Metadata["protocol"] = proto
		}
	case p < 9:
		in.Port = pickOf(g.r, genOwnPorts)
	default:
		in.SecureEnabled = !in.SecureEnabled
	}
	insts[id] = in
	return EurekaPut(reg, in, inDelta)
}
