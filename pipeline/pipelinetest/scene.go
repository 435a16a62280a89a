package pipelinetest

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/test/harness"
	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// Scene is a harness and the registries' truth: what each configured
// registry lists now, as the steps played on it say. The named scenarios
// and the randomized differential are lists of Steps played on a Scene;
// Check compares every client with the Oracle of that truth.
type Scene struct {
	H *Harness
	// truth: registry → service name → the service it lists (a scripted
	// registry's services have a name and no namespace, group or
	// datacenter: the name is the key).
	truth map[string]map[string]registries.Service
	// clients are connected at the start and kept; Check also connects a
	// new one each time.
	clients []*Client
	checks  int
	// played is the steps so far, for a failure's report.
	played []Step
	// lenient: a step that cannot apply (its registry or client is not
	// there, a Check before every registry synced) is skipped instead of
	// failing the test, as shrinking drops events others depend on.
	lenient bool
	// timeout bounds each client's wait at a Check (checkTimeout).
	timeout time.Duration
	// restarted: the bridge restarted and the clients have not
	// reconnected yet (they do once it serves: reconnect).
	restarted bool
}

// Step is one thing that happens to a pipeline: a registry's observation
// (reported to its watcher's Reporter, which decides what the pipeline's
// Sink hears, as for every real watcher), a reload,
// time passing, a client's reconnection, or a Check. String renders it as
// the Go expression that makes it, so that a failing sequence can be pasted
// into a named scenario.
type Step interface {
	Play(*Scene)
	String() string
}

// NewScene returns a scene of h, whose registries list nothing yet. When
// the test fails, the steps played so far are logged.
func NewScene(h *Harness) *Scene {
	s := &Scene{H: h, truth: map[string]map[string]registries.Service{}, timeout: checkTimeout}
	for _, name := range h.Configured() {
		s.truth[name] = map[string]registries.Service{}
	}
	h.T.Cleanup(func() {
		if h.T.Failed() {
			h.T.Logf("steps played:\n%s", s.Played())
		}
	})
	return s
}

// Play plays steps in order, then a final Check.
func (s *Scene) Play(steps ...Step) {
	s.H.T.Helper()
	for _, st := range append(slices.Clone(steps), Check()) {
		s.played = append(s.played, st)
		st.Play(s)
	}
}

// Played renders the steps played so far, one per line.
func (s *Scene) Played() string {
	var b strings.Builder
	for _, st := range s.played {
		b.WriteString("\t" + st.String() + ",\n")
	}
	return b.String()
}

// Truth returns what each configured registry lists now: a Eureka
// registry's is what a fresh watcher reads of its server.
func (s *Scene) Truth() map[string][]registries.Service {
	out := make(map[string][]registries.Service, len(s.truth))
	for name, svcs := range s.truth {
		if s.H.isEureka(name) {
			out[name] = s.H.eurekaTruth(name)
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(svcs)) {
			out[name] = append(out[name], svcs[k])
		}
	}
	return out
}

func (s *Scene) fail(format string, args ...any) {
	s.H.T.Helper()
	s.H.T.Fatalf(format, args...)
}

// skip reports whether a step that cannot apply (why) is skipped; a strict
// scene fails the test instead.
func (s *Scene) skip(format string, args ...any) bool {
	s.H.T.Helper()
	if !s.lenient {
		s.fail(format, args...)
	}
	return true
}

// configured reports whether registry name is configured, or skips the
// step.
func (s *Scene) configured(name string) bool {
	s.H.T.Helper()
	return s.truth[name] != nil || !s.skip("no registry %q", name)
}

func (s *Scene) do(reg string, calls ...Call) {
	s.H.T.Helper()
	r := s.H.regs[reg]
	if r == nil {
		s.skip("no registry %q", reg)
		return
	}
	for _, c := range calls {
		if err := r.Do(c); err != nil {
			s.fail("%v", err)
		}
	}
}

// unlisted reports whether registry reg's running watcher has had no
// listing yet (it was just started, or restarted): its first observation
// is a complete read, as a real watcher lists before it reads.
func (s *Scene) unlisted(reg string) bool {
	s.H.T.Helper()
	r := s.H.regs[reg]
	if r == nil {
		return false
	}
	listed, err := r.Listed()
	if err != nil {
		s.fail("%v", err)
	}
	return !listed
}

// truthWith returns what registry reg lists now with svc added or replaced
// (without the service called name when svc is nil), sorted by name.
func (s *Scene) truthWith(reg, name string, svc *registries.Service) []registries.Service {
	var out []registries.Service
	for _, k := range slices.Sorted(maps.Keys(s.truth[reg])) {
		if k != name {
			out = append(out, s.truth[reg][k])
		}
	}
	if svc != nil {
		out = append(out, *svc)
		slices.SortFunc(out, func(a, b registries.Service) int { return strings.Compare(a.Name, b.Name) })
	}
	return out
}

// step is a Step: the Go expression that makes it, and what playing it
// does.
type step struct {
	expr string
	play func(*Scene)
}

func (st step) Play(s *Scene) {
	s.H.T.Helper()
	st.play(s)
}

func (st step) String() string { return st.expr }

// registryStep is a step of registry, played only while the scene's
// configuration has it (a strict scene fails otherwise).
func registryStep(registry, expr string, play func(*Scene)) Step {
	return step{expr: expr, play: func(s *Scene) {
		s.H.T.Helper()
		if s.configured(registry) {
			play(s)
		}
	}}
}

// List is a registry's complete read, as a watcher makes it on its first
// read or a catalog change: the listing of every service it lists
// (Reporter.Listing, which sends it and the removals of those the
// Reporter held and the listing omits), a read of each (Reporter.Read:
// sent when it differs from the last one sent), and Synced (the
// Reporter's, once the run's first listing was read).
func List(registry string, services ...registries.Service) Step {
	return listStep(registry, services, false)
}

// Relist is List read right after a reconnection: Reporter.Reconnected
// first, so that the listing's removals and the reads are marked Relist
// (Snapshot.Relist): a disappearance it reports is held down.
func Relist(registry string, services ...registries.Service) Step {
	return listStep(registry, services, true)
}

func listStep(registry string, services []registries.Service, relist bool) Step {
	expr := fmt.Sprintf("pipelinetest.%s(%q%s)", pick(relist, "Relist", "List"), registry, servicesArgs(services))
	return registryStep(registry, expr, func(s *Scene) { s.list(registry, services, relist) })
}

// list plays List (Relist when relist) of registry.
func (s *Scene) list(registry string, services []registries.Service, relist bool) {
	s.H.T.Helper()
	s.do(registry, ListCalls(services, relist)...)
	s.truth[registry] = map[string]registries.Service{}
	for _, svc := range services {
		s.truth[registry][svc.Name] = svc
	}
}

// Set is a registry's read of one service: its instances now
// (Reporter.Read). A service the registry does not list yet is listed
// first, as a catalog change brings it: the listing of every service it
// lists and this one (Reporter.Listing). A watcher that has not listed yet
// (just restarted) makes its first read instead: List of every service
// with this one.
func Set(registry string, svc registries.Service) Step { return setStep(registry, svc, false) }

// SetRelist is Set read right after its own query's index went backwards,
// as Consul's watcher reads it: Reporter.MarkRelist, then Set; the read is
// marked Relist (a disappearance it reports is held down).
func SetRelist(registry string, svc registries.Service) Step { return setStep(registry, svc, true) }

func setStep(registry string, svc registries.Service, relist bool) Step {
	expr := fmt.Sprintf("pipelinetest.%s(%q, %s)", pick(relist, "SetRelist", "Set"), registry, serviceString(svc))
	return registryStep(registry, expr, func(s *Scene) {
		s.H.T.Helper()
		if s.unlisted(registry) {
			s.list(registry, s.truthWith(registry, svc.Name, &svc), relist)
			return
		}
		if _, ok := s.truth[registry][svc.Name]; !ok {
			names := slices.Collect(maps.Keys(s.truth[registry]))
			s.do(registry, Call{Op: OpListing, Keys: keysOf(append(names, svc.Name))})
		}
		s.do(registry, Call{Op: OpSnapshot, Service: svc, Relist: relist})
		s.truth[registry][svc.Name] = svc
	})
}

// Remove is a registry's read that the service called name is gone:
// Reporter.Remove, which sends the listing without it, then its removal.
// A watcher that has not listed yet makes its first read instead: List of
// every other service.
func Remove(registry, name string) Step { return removeStep(registry, name, false) }

// RemoveRelist is Remove read right after a reconnection: a watcher then
// relists, so it is Relist of every other service (the removal, inside
// the listing, is marked Relist).
func RemoveRelist(registry, name string) Step { return removeStep(registry, name, true) }

func removeStep(registry, name string, relist bool) Step {
	expr := fmt.Sprintf("pipelinetest.%s(%q, %q)", pick(relist, "RemoveRelist", "Remove"), registry, name)
	return registryStep(registry, expr, func(s *Scene) {
		s.H.T.Helper()
		if relist || s.unlisted(registry) {
			s.list(registry, s.truthWith(registry, name, nil), relist)
			return
		}
		svc, ok := s.truth[registry][name]
		if !ok {
			svc = registries.Service{Name: name}
		}
		s.do(registry, Call{Op: OpRemove, Service: svc})
		delete(s.truth[registry], name)
	})
}

// Fail is a failed read of the service called name (Reporter.Fail: sent
// once per run of failures, and its next read is marked Relist), or ("")
// a failed listing of the whole registry (Reporter.FailListing: one
// registry-wide error, and the next listing's removals are marked Relist).
// The truth is unchanged: the registry still lists what it did.
func Fail(registry, name string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Fail(%q, %q)", registry, name), play: func(s *Scene) {
		s.do(registry, Call{Op: OpFail, Service: registries.Service{Name: name}})
	}}
}

// Down is an outage of the whole registry (its connection lost, its server
// silent): Reporter.Down, a registry-wide error and a failed read of every
// service it lists, whose next reads are marked Relist. The truth is
// unchanged: the registry still lists what it did.
func Down(registry string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Down(%q)", registry), play: func(s *Scene) {
		s.do(registry, Call{Op: OpDown})
	}}
}

// Listing is a registry's complete read that lists the services called
// names, before the reads of that read (Reporter.Listing): the Reporter
// sends it, the delete guard judges it, and the Reporter sends the removal
// of every service it held and the listing omits. A listed service not
// read yet is in no truth until a Set reads it.
func Listing(registry string, names ...string) Step {
	return registryStep(registry, fmt.Sprintf("pipelinetest.Listing(%q%s)", registry, stringArgs(names)), func(s *Scene) {
		s.do(registry, Call{Op: OpListing, Keys: keysOf(names)})
		for k := range s.truth[registry] {
			if !slices.Contains(names, k) {
				delete(s.truth[registry], k)
			}
		}
	})
}

// AddRegistry is a reload that adds a registry (a consul-typed one of that
// name) after the configured ones, or restarts it when configured: its
// watcher, with a new Reporter, lists nothing until a List step (or a Set
// or Remove, which make its first read).
func AddRegistry(name string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.AddRegistry(%q)", name), play: func(s *Scene) {
		if s.truth[name] != nil {
			s.H.RestartRegistry(name)
			return
		}
		s.H.AddRegistry(RegistryConfig{Name: name})
		s.truth[name] = map[string]registries.Service{}
	}}
}

// RestartRegistry is a reload that changes a registry's configuration in a
// way that needs a new watcher, with a new Reporter, which must relist
// (Relist) before the next Check: the Syncer removes what its first
// listing omits once it synced.
func RestartRegistry(name string) Step {
	return registryStep(name, fmt.Sprintf("pipelinetest.RestartRegistry(%q)", name), func(s *Scene) {
		s.H.RestartRegistry(name)
	})
}

// RemoveRegistry is a reload that removes a registry.
func RemoveRegistry(name string) Step {
	return registryStep(name, fmt.Sprintf("pipelinetest.RemoveRegistry(%q)", name), func(s *Scene) {
		s.H.RemoveRegistry(name)
		delete(s.truth, name)
	})
}

// Advance moves the Syncer's clock by d.
func Advance(d time.Duration) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Advance(%d * time.Millisecond)", d.Milliseconds()),
		play: func(s *Scene) { s.H.Advance(d) }}
}

// Confirm confirms the removals the registry's delete guard holds (an
// operator's POST /debug/registryz/<registry>/confirm); a guard that holds
// nothing is no error here.
func Confirm(registry string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Confirm(%q)", registry),
		play: func(s *Scene) { _, _ = s.H.Pipeline.Syncer.ConfirmDeletes(registry) }}
}

// Connect connects a FollowAll client called name that stays for the rest
// of the scene.
func Connect(name string, p Protocol) Step { return ConnectKind(name, p, FollowAll) }

// ConnectKind connects a client of kind k (a Watch client watching
// clusters) that stays for the rest of the scene.
func ConnectKind(name string, p Protocol, k Kind, clusters ...string) Step {
	proto := "pipelinetest." + pick(p == SotW, "SotW", "Delta")
	expr := fmt.Sprintf("pipelinetest.Connect(%q, %s)", name, proto)
	if k != FollowAll {
		expr = fmt.Sprintf("pipelinetest.ConnectKind(%q, %s, pipelinetest.%s%s)", name, proto, k, stringArgs(clusters))
	}
	return step{expr: expr, play: func(s *Scene) {
		s.H.T.Helper()
		if s.lenient && !s.synced() {
			return // the pipeline may never serve: a listing was dropped
		}
		s.reconnect()
		s.clients = append(s.clients, s.H.ConnectKind(name, p, k, clusters...))
	}}
}

// Rewatch makes the scene's Watch client called name watch clusters.
func Rewatch(name string, clusters ...string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Rewatch(%q%s)", name, stringArgs(clusters)), play: func(s *Scene) {
		s.H.T.Helper()
		s.reconnect()
		for _, c := range s.clients {
			if c.Name == name && c.Kind == Watch {
				if err := c.Rewatch(clusters); err != nil {
					s.fail("client %s: rewatch: %v", c.Name, err)
				}
				return
			}
		}
		s.skip("no Watch client %q", name)
	}}
}

// Reconnect reconnects the scene's client called name (Client.Reconnect).
func Reconnect(name string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Reconnect(%q)", name), play: func(s *Scene) {
		s.H.T.Helper()
		s.reconnect()
		for _, c := range s.clients {
			if c.Name == name {
				c.Reconnect()
				return
			}
		}
		s.skip("no client %q", name)
	}}
}

// Reload is a reload that changes registry rc.Name's configuration to rc
// (its host template, service port, resolution): the registry restarts
// with a new watcher, which must relist (Relist) before the next Check.
func Reload(rc RegistryConfig) Step {
	return registryStep(rc.Name, fmt.Sprintf("pipelinetest.Reload(%#v)", rc), func(s *Scene) {
		rcs := slices.Clone(s.H.opts.Registries)
		for i := range rcs {
			if rcs[i].Name == rc.Name {
				rcs[i] = rc
			}
		}
		s.H.Configure(rcs, rc.Name)
	})
}

// RestartBridge restarts the bridge: the pipeline stops once its state dir
// holds every registry's listing, and a new one starts with the same
// options, whose registries list nothing until List steps (or the sync
// timeout, Advance, serves their persisted listings). Every client
// reconnects to it: a Delta client with initial_resource_versions.
func RestartBridge() Step {
	return step{expr: "pipelinetest.RestartBridge()", play: func(s *Scene) {
		if s.H.opts.StateDir != "" {
			s.H.Advance(stateWriteDelay)
			truth := s.Truth()
			kept := s.H.Pipeline.Syncer.KeptPorts()
			harness.Eventually(s.H.T, checkTimeout, "every registry's listing and the kept ports persisted", func() error {
				for name, svcs := range truth {
					if err := persisted(s.H.opts.StateDir, name, svcs); err != nil {
						return err
					}
				}
				return persistedPorts(s.H.opts.StateDir, kept)
			})
		}
		s.H.Stop()
		prev := s.H
		s.H = Start(s.H.T, s.H.opts)
		// The policy source reads its files again on start: the same
		// policy serves from the first push.
		s.H.policy, s.H.rules, s.H.routing, s.H.policyObjects = prev.policy, prev.rules, prev.routing, prev.policyObjects
		policy := s.H.policy
		if policy != nil {
			s.H.Pipeline.XDS.SetPolicies(policy)
		}
		s.restarted = true
	}}
}

// reconnect reconnects every client after a RestartBridge, once the new
// bridge serves (its registries listed, or its sync timeout passed).
func (s *Scene) reconnect() {
	s.H.T.Helper()
	if !s.restarted {
		return
	}
	s.restarted = false
	for _, c := range s.clients {
		c.h = s.H
		c.Reconnect()
	}
}

// Expect waits until every client of the scene holds cluster and its
// ClusterLoadAssignment with exactly endpoints ("address:port", any
// order): the target a scenario names, checked apart from the oracle.
func Expect(cluster string, endpoints ...string) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Expect(%q%s)", cluster, stringArgs(endpoints)), play: func(s *Scene) {
		s.H.T.Helper()
		s.reconnect()
		want := slices.Sorted(slices.Values(endpoints))
		for _, c := range s.clients {
			if c.Kind == Watch && !slices.Contains(c.watched, cluster) {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
			err := c.wait(ctx, func() error {
				served := c.Served()
				// A ClusterLoadAssignment a client holds for a cluster it no
				// longer has (SotW keeps it) is not served to it.
				if _, ok := served[resourcev3.ClusterType][cluster]; !ok {
					return fmt.Errorf("no Cluster %s", cluster)
				}
				got, ok := served[resourcev3.EndpointType][cluster]
				if !ok {
					return fmt.Errorf("no ClusterLoadAssignment %s", cluster)
				}
				_, eps, err := ads.Endpoints(&anypb.Any{TypeUrl: resourcev3.EndpointType, Value: []byte(got)})
				if err != nil {
					return err
				}
				if slices.Sort(eps); !slices.Equal(eps, want) {
					return fmt.Errorf("endpoints %v", eps)
				}
				return nil
			})
			cancel()
			if err != nil {
				s.fail("client %s: %s should hold %v: %v", c.Name, cluster, want, err)
			}
		}
	}}
}

// Holding checks that registry's delete guard holds the removals of
// guarded services (0: the guard is not engaged) and that heldDown
// disappearances wait for their hold-down, now (the Syncer's Status): a
// scenario's check that a disappearance did not take effect, apart from
// what the clients hold.
func Holding(registry string, guarded, heldDown int) Step {
	return step{expr: fmt.Sprintf("pipelinetest.Holding(%q, %d, %d)", registry, guarded, heldDown), play: func(s *Scene) {
		s.H.T.Helper()
		for _, st := range s.H.Pipeline.Syncer.Status() {
			if st.Name != registry {
				continue
			}
			got := 0
			if st.DeleteGuard != nil {
				got = st.DeleteGuard.Services
			}
			if got != guarded || st.HeldDown != heldDown {
				s.fail("registry %s: the delete guard holds %d services and %d are held down, want %d and %d",
					registry, got, st.HeldDown, guarded, heldDown)
			}
			return
		}
		s.skip("no registry %q", registry)
	}}
}

// Under plays steps only when the pipeline's conflict policy is policy
// (a scenario's Expect that differs between the policies).
func Under(policy string, steps ...Step) Step {
	parts := make([]string, len(steps))
	for i, st := range steps {
		parts[i] = st.String()
	}
	return step{expr: fmt.Sprintf("pipelinetest.Under(%q, %s)", policy, strings.Join(parts, ", ")), play: func(s *Scene) {
		s.H.T.Helper()
		if cmp.Or(s.H.opts.ConflictPolicy, syncer.ConflictMerge) != policy {
			return
		}
		for _, st := range steps {
			st.Play(s)
		}
	}}
}

func stringArgs(ss []string) string {
	out := ""
	for _, x := range ss {
		out += fmt.Sprintf(", %q", x)
	}
	return out
}

func pick(cond bool, a, b string) string {
	if cond {
		return a
	}
	return b
}

// checkTimeout bounds the wait for every client to hold what the oracle
// serves: debounce, pushes and sends on a loaded machine.
const checkTimeout = 20 * time.Second

// Check is a quiescent point: the Syncer's held disappearances and delete
// guards are let run out (the clock moves past the longest of them), the
// Store's handlers are done, and then every client (those connected so far
// and a new one) must hold, byte for byte, what a freshly built pipeline
// fed the registries' truth serves a new client, and the Store must hold
// exactly the objects that pipeline's Store holds.
func Check() Step {
	return step{expr: "pipelinetest.Check()", play: func(s *Scene) {
		s.H.T.Helper()
		if s.lenient && !s.synced() {
			return // a listing this check needs was dropped
		}
		s.quiesce()
		want, wantStore := s.H.Oracle(s.Truth())
		s.checks++
		// The pipeline serves once every registry synced (or the sync timeout
		// passed): no client connects before.
		s.H.WaitReady()
		s.reconnect()
		late := s.H.Connect(fmt.Sprintf("late-%d", s.checks), Protocol(s.checks%2))
		defer late.Close()
		for _, c := range append(slices.Clone(s.clients), late) {
			if err := c.AwaitErr(want, s.timeout); err != nil {
				s.fail("check %d: %v", s.checks, err)
			}
		}
		if got := s.H.StoreObjects(); !maps.Equal(got, wantStore) {
			s.fail("check %d: the store holds\n%s\nwant (a fresh pipeline's)\n%s", s.checks, objectsString(got), objectsString(wantStore))
		}
	}}
}

// synced reports whether every registry the Syncer knows synced.
func (s *Scene) synced() bool {
	for _, st := range s.H.Pipeline.Syncer.Status() {
		if !st.Synced {
			return false
		}
	}
	return true
}

// quiesce lets every held disappearance and delete guard run out and waits
// for what they write to reach the Store's handlers.
func (s *Scene) quiesce() {
	s.H.T.Helper()
	p := s.H.opts.Outage
	s.H.Advance(max(p.HoldDown, p.DeleteGuardTimeout) + time.Second)
	// The timers fired on the fake clock run on their own goroutines.
	harness.Eventually(s.H.T, checkTimeout, "the Syncer quiescent", func() error {
		for _, st := range s.H.Pipeline.Syncer.Status() {
			if st.HeldDown > 0 || st.DeleteGuard != nil {
				return fmt.Errorf("registry %s: %d held down, delete guard %+v", st.Name, st.HeldDown, st.DeleteGuard)
			}
		}
		return nil
	})
	s.H.Settle()
}

func objectsString(m map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(m)) {
		fmt.Fprintf(&b, "  %s %.12s\n", k, m[k])
	}
	return b.String()
}

// stateWriteDelay is the Syncer's: a listing is persisted at most this
// long after it changed (syncer state.go).
const stateWriteDelay = 3 * time.Second

// persistedPorts reports whether dir holds exactly the kept ports' hosts
// and numbers.
func persistedPorts(dir string, kept syncer.KeptPorts) error {
	data, err := os.ReadFile(filepath.Join(dir, "ports.json"))
	if err != nil {
		return err
	}
	var pp struct {
		Hosts map[string]struct {
			Port uint32 `json:"port"`
		} `json:"hosts"`
	}
	if err := json.Unmarshal(data, &pp); err != nil {
		return err
	}
	got, want := map[string]uint32{}, map[string]uint32{}
	for h, p := range pp.Hosts {
		got[h] = p.Port
	}
	for h, p := range kept {
		want[h] = p.Port
	}
	if !maps.Equal(got, want) {
		return fmt.Errorf("ports.json holds %v, the bridge keeps %v", got, want)
	}
	return nil
}

// persisted reports whether dir holds registry's persisted listing of
// exactly svcs' keys.
func persisted(dir, registry string, svcs []registries.Service) error {
	data, err := os.ReadFile(filepath.Join(dir, registry+".json"))
	if err != nil {
		return err
	}
	var pl struct {
		Services []registries.Service `json:"services"`
	}
	if err := json.Unmarshal(data, &pl); err != nil {
		return err
	}
	var got, want []string
	for _, s := range pl.Services {
		got = append(got, s.Key().String())
	}
	for _, s := range svcs {
		want = append(want, s.Key().String())
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		return fmt.Errorf("registry %s persisted %v, lists %v", registry, got, want)
	}
	return nil
}

// keysOf is the keys of the services called names (a scripted registry's).
func keysOf(names []string) []registries.ServiceKey {
	keys := make([]registries.ServiceKey, len(names))
	for i, n := range names {
		keys[i] = registries.ServiceKey{Name: n}
	}
	return keys
}
