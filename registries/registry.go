package registries

import (
	"context"
	"strings"
	"time"
)

// Registry follows one external service registry and reports every service's
// instances to a Sink.
type Registry interface {
	// Name is the registry's configured name (a DNS-1123 label), the value
	// of the meshbridge.io/registry label on everything it produces.
	Name() string
	// Run watches the registry until ctx is done, calling sink as services
	// change. It returns nil when ctx is cancelled, or an error when the
	// registry cannot be watched at all (e.g. invalid configuration); read
	// errors are reported through Sink.Snapshot with Err set and retried.
	Run(ctx context.Context, sink Sink) error
}

// Sink receives what a Registry observes. A registry's one caller of its
// Sink is its Reporter, which keeps this contract by construction
// (registrytest.Recorder checks it).
type Sink interface {
	// Snapshot delivers the authoritative state of one service, or an error
	// reading it (see Snapshot).
	Snapshot(s Snapshot)
	// Synced tells that the registry has delivered its first complete
	// listing: one Snapshot for every service it knows. It is called once.
	Synced(registry string)
	// Listing reports the keys (Service.Key) of every service one complete
	// read of the registry's catalog found within scope: the zero Scope for
	// the whole registry, a namespace and group (ScopeOf) for a Nacos
	// registry, which lists one namespace and group at a time. It is
	// called after every complete read (the first, a re-list, a catalog
	// change), before the Snapshots of that read. removed are the services
	// the read removes (in scope, not in keys, sorted): exactly the Removed
	// Snapshots that follow, so that the consumer can judge them together
	// (the delete guard of package syncer) before any is applied. The
	// Reporter is the one place removals are computed; the consumer does
	// not diff listings.
	Listing(registry string, scope Scope, keys, removed []ServiceKey)
	// Serving returns the keys of the services the consumer holds for the
	// registry as a run of it starts: a previous run's (a configuration
	// reload restarted the registry) and a persisted listing's (state.dir).
	// The run's Reporter starts from them, so that its listings remove
	// what the registry no longer lists whichever run listed it (Reporter
	// rule 8). nil for a consumer that holds nothing.
	Serving(registry string) []ServiceKey
}

// SinkFuncs adapts functions to a Sink; a nil field ignores that call.
type SinkFuncs struct {
	SnapshotFunc func(Snapshot)
	SyncedFunc   func(registry string)
	ListingFunc  func(registry string, scope Scope, keys, removed []ServiceKey)
	ServingFunc  func(registry string) []ServiceKey
}

var _ Sink = SinkFuncs{}

// Snapshot implements Sink.
func (f SinkFuncs) Snapshot(s Snapshot) {
	if f.SnapshotFunc != nil {
		f.SnapshotFunc(s)
	}
}

// Synced implements Sink.
func (f SinkFuncs) Synced(registry string) {
	if f.SyncedFunc != nil {
		f.SyncedFunc(registry)
	}
}

// Listing implements Sink.
func (f SinkFuncs) Listing(registry string, scope Scope, keys, removed []ServiceKey) {
	if f.ListingFunc != nil {
		f.ListingFunc(registry, scope, keys, removed)
	}
}

// Serving implements Sink.
func (f SinkFuncs) Serving(registry string) []ServiceKey {
	if f.ServingFunc != nil {
		return f.ServingFunc(registry)
	}
	return nil
}

// Snapshot is one service's state as read from a registry.
type Snapshot struct {
	// Registry is the name of the registry that read it.
	Registry string
	// Service is the service, with its authoritative instance list when Err
	// is nil and Removed is false.
	Service Service
	// Removed is true when the registry no longer has the service at all: an
	// authoritative deletion, named by the Listing before it.
	Removed bool
	// Err is set when the service could not be read. The consumer keeps the
	// last-known-good state and ignores Service.Instances. An Err with an
	// empty Service.Name means a listing failed: Scope's, the next complete
	// listing of which (Sink.Listing) ends the error.
	Err error
	// Scope, on a failed listing (Err set, Service.Name empty), is the
	// listing scope that failed (Sink.Listing's; the zero Scope the whole
	// registry).
	Scope Scope
	// Observed is when the watcher saw the change: the start of the
	// event-to-push latency.
	Observed time.Time
	// Relist is set on a snapshot read right after a (re)connection, a
	// registry restart or an index reset, when the registry's state may
	// still be filling in: a disappearance it reports (an empty instance
	// list, Removed) is held down before it is applied (package
	// syncer). A snapshot of a registry that is up and stable (a
	// deregistration, an instance turning unhealthy) leaves it unset and
	// takes effect at once.
	Relist bool
}

// Service is a registry service with its instances.
type Service struct {
	// Name is the registry-native service name (Consul service name, Nacos
	// service name, or the host for the file registry); for a Dubbo service,
	// "providers:<interface>:<version>:<group>" (interface-level, Dubbo's
	// own service key in Nacos) or the application name.
	Name string
	// Host, when set, is used as the mesh host instead of the registry's host
	// template: a registry that names its services itself sets it (the file
	// registry writes hosts as they are; a Dubbo service is named by the
	// Dubbo host templates, package registries/dubbo). Package translate
	// lower-cases and validates it like a template's result.
	Host string
	// Datacenter is set when the service lives in a remote Consul datacenter;
	// host templates use it.
	Datacenter string
	// Namespace and Group are registry scopes (Nacos namespace and group);
	// empty where the registry has none. A Dubbo group is Dubbo.Group.
	Namespace string
	Group     string
	// Ports are ports the registry declares for the service (file registry).
	// Empty means "derive from instances".
	Ports []Port
	// Instances are the service's usable instances: the watcher already
	// dropped unhealthy ones. Order does not matter.
	Instances []Instance
	// PortPerProtocol gives each protocol the instances serve a port of
	// its own (a Dubbo service: its dubbo and tri ports), instead of one
	// port for the service; declared Ports win over it.
	PortPerProtocol bool
	// HostError, when set, is why the registry could not name the service
	// (Host empty): its host template failed on the service's data.
	// Package translate rejects the service with it.
	HostError string
}

// ServiceKey identifies a service within its registry: its name, qualified
// by namespace, group and datacenter, since the same name in two Nacos
// namespaces or groups, or two Consul datacenters, is two services. It is
// comparable (a map key), and never parsed from its String.
type ServiceKey struct {
	Namespace, Group, Datacenter, Name string
}

// Key returns the service's ServiceKey.
func (s Service) Key() ServiceKey {
	return ServiceKey{Namespace: s.Namespace, Group: s.Group, Datacenter: s.Datacenter, Name: s.Name}
}

// Service returns the Service k names, without instances: the identity of
// a removal or a failed read when nothing more is known.
func (k ServiceKey) Service() Service {
	return Service{Namespace: k.Namespace, Group: k.Group, Datacenter: k.Datacenter, Name: k.Name}
}

// String is the key as logs, /debug pages and orderings show it: the name
// alone when no qualifier is set, else "<namespace>/<group>/<datacenter>/<name>".
func (k ServiceKey) String() string {
	p, n := k.parts()
	return strings.Join(p[:n], "")
}

// parts returns the pieces String joins, and how many there are.
func (k ServiceKey) parts() ([7]string, int) {
	if k.Namespace == "" && k.Group == "" && k.Datacenter == "" {
		return [7]string{k.Name}, 1
	}
	return [7]string{k.Namespace, "/", k.Group, "/", k.Datacenter, "/", k.Name}, 7
}

// MarshalText encodes k as its String (a JSON object key).
func (k ServiceKey) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Compare orders keys as their Strings compare (strings.Compare), without
// building them: the order of listings and of same-host claimants (package
// syncer).
func (k ServiceKey) Compare(o ServiceKey) int {
	a, na := k.parts()
	b, nb := o.parts()
	if na == 1 && nb == 1 {
		return strings.Compare(a[0], b[0])
	}
	// Walk both joined strings a byte at a time, piece by piece.
	i, j, x, y := 0, 0, 0, 0 // piece and offset in a, in b
	for {
		for i < na && x == len(a[i]) {
			i, x = i+1, 0
		}
		for j < nb && y == len(b[j]) {
			j, y = j+1, 0
		}
		switch {
		case i == na && j == nb:
			return 0
		case i == na:
			return -1
		case j == nb:
			return 1
		}
		if c, d := a[i][x], b[j][y]; c != d {
			if c < d {
				return -1
			}
			return 1
		}
		x, y = x+1, y+1
	}
}

// Scope is a listing scope (Sink.Listing): the services of one Nacos
// namespace and group (ScopeOf), or, the zero Scope, every service of the
// registry.
type Scope struct {
	Namespace, Group string
}

// ScopeOf returns the scope of a listing of namespace and group, group not
// empty.
func ScopeOf(namespace, group string) Scope { return Scope{Namespace: namespace, Group: group} }

// Holds reports whether the service k names is within sc.
func (sc Scope) Holds(k ServiceKey) bool {
	return sc == Scope{} || (k.Namespace == sc.Namespace && k.Group == sc.Group)
}

// String is the scope as logs show it: "" for the whole registry, else
// "<namespace>/<group>".
func (sc Scope) String() string {
	if sc == (Scope{}) {
		return ""
	}
	return sc.Namespace + "/" + sc.Group
}

// Port is a port a registry declares for a service.
type Port struct {
	Number uint32
	// Protocol is a registry protocol name: http, http2, grpc, tcp, dubbo.
	Protocol string
}

// Instance is one registered endpoint of a service.
type Instance struct {
	// ID is unique within the registry (Consul: node "/" service ID). It
	// names the instance's WorkloadEntry, so it must be stable across reads.
	ID string
	// Address is an IP or a hostname.
	Address string
	// Protocol is the instance's declared protocol (metadata "protocol"),
	// empty when unknown.
	Protocol string
	// Locality is "region/zone/subzone"; parts may be empty.
	Locality string
	// Labels are the raw tags and metadata (not yet sanitized).
	Labels map[string]string
	// Port is the instance's port.
	Port uint32
	// Weight is the load-balancing weight on the common scale
	// (model.DefaultWeight is the registry's default weight); 0 means
	// model.DefaultWeight.
	Weight uint32
	// Extra holds what few instances have (Dubbo providers, malformed
	// entries); nil for the others. Read-only once the instance is listed:
	// copies of an instance (Compact) share it. Read it through Ports,
	// Methods and Invalid.
	Extra *InstanceExtra
}

// InstanceExtra is the part of an Instance that few instances have: the
// ports and methods of a Dubbo provider, or why a registry entry could not
// be read. Fields kept in Instance itself would cost every instance their
// size, and the sync step holds one Instance per registered instance.
type InstanceExtra struct {
	// Ports, when set, are every port the instance serves, one per protocol
	// (a Dubbo provider exporting over dubbo and tri); the instance's Port
	// and Protocol are then the first. Each serves the service port of its
	// protocol.
	Ports []Port
	// Methods are the RPC methods the instance serves (Dubbo), for the
	// ServiceEntry's meshbridge.io/dubbo-methods annotation.
	Methods []string
	// Defaults are what the provider declares for its callers (Dubbo's
	// timeout, retries and loadbalance URL parameters, as written), for the
	// ServiceEntry's meshbridge.io/dubbo-defaults annotation.
	Defaults ProviderDefaults
	// Invalid, when set, says why the watcher could not read the registry
	// entry as an instance (e.g. a malformed Dubbo provider URL): translate
	// rejects the instance with reason "malformed" and this detail, so that
	// it is logged and counted like any rejected instance. The instance's
	// ID names the entry; its other fields may be zero.
	Invalid string
}

// ProviderDefaults are a provider's declared call defaults, as its
// registry writes them ("" unset): Dubbo's timeout (milliseconds), retries
// (attempts after the first) and loadbalance (random, roundrobin,
// leastactive, ...).
type ProviderDefaults struct {
	Timeout, Retries, LoadBalance string
}

// IsZero reports whether d declares nothing.
func (d ProviderDefaults) IsZero() bool { return d == ProviderDefaults{} }

// InvalidInstance is the instance that reports a registry entry the
// watcher could not read: id names the entry, detail says why (see
// InstanceExtra.Invalid).
func InvalidInstance(id, detail string) Instance {
	return Instance{ID: id, Extra: &InstanceExtra{Invalid: detail}}
}

// Ports returns Extra.Ports, every port the instance serves when it serves
// several (see InstanceExtra.Ports); nil when Extra is nil.
func (i *Instance) Ports() []Port {
	if i.Extra == nil {
		return nil
	}
	return i.Extra.Ports
}

// Methods returns Extra.Methods, the RPC methods the instance serves; nil
// when Extra is nil.
func (i *Instance) Methods() []string {
	if i.Extra == nil {
		return nil
	}
	return i.Extra.Methods
}

// Defaults returns Extra.Defaults, what the provider declares for its
// callers; zero when Extra is nil.
func (i *Instance) Defaults() ProviderDefaults {
	if i.Extra == nil {
		return ProviderDefaults{}
	}
	return i.Extra.Defaults
}

// Invalid returns Extra.Invalid, why the registry entry could not be read
// as an instance; "" when Extra is nil.
func (i *Instance) Invalid() string {
	if i.Extra == nil {
		return ""
	}
	return i.Extra.Invalid
}
