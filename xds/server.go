package xds

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/xds/ads"
	"github.com/meshbridge/meshbridge/xds/cache"
)

// ServiceSource lists the services (one per host) that clusters, listeners
// and routes are generated from; the ServiceEntry controller implements it.
// Services must be safe for concurrent use; the returned slice and services
// are read-only.
type ServiceSource interface {
	Services() []*model.Service
}

// Options configures a DiscoveryServer. The zero value of each field is its
// default.
type Options struct {
	// Address is the listen address of the ADS gRPC server; default
	// "127.0.0.1:15010"; port 0 picks a free port (see Addr).
	Address string
	// DebounceAfter is the quiet period before a push (config key
	// debounce.after); 0 pushes without one. The debounce fields are taken
	// as given, as Debounce's are: the configuration holds the defaults.
	DebounceAfter time.Duration
	// DebounceMax caps how long requests are merged (at least
	// DebounceAfter).
	DebounceMax time.Duration
	// DebounceEDSMax caps how long EDS-only requests are merged, kept
	// within [DebounceAfter, DebounceMax] (ClampEDSMax).
	DebounceEDSMax time.Duration
	// EnableEDSDebounce debounces EDS-only pushes like full ones; when false
	// they are pushed at once.
	EnableEDSDebounce bool
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// TLS, when set, serves Address over TLS, with mTLS when it names a
	// client CA; the files are re-read when they change. Nil serves
	// plaintext (the default, for loopback).
	TLS *TLSConfig
	// MCP, when set, serves istiod's MCP client (Istio config type URLs)
	// from MCP.Source: on Address, or only on MCPAddress when that is set.
	// Nil serves no MCP: an Istio config type URL ends the stream with
	// FailedPrecondition naming mcp.enabled.
	MCP *MCPOptions
	// MCPAddress, when set, serves MCP on a listener of its own (its own
	// gRPC server over the same caches, bound with Address when Run starts
	// and served once the first full push is done); port 0 picks a free port (see MCPAddr). Address
	// then refuses Istio config types, and MCPAddress every other type,
	// with FailedPrecondition naming the key of the other listener
	// (mcp.address, xds.address). Requires MCP. Empty serves MCP on Address.
	MCPAddress string
	// MCPTLS, when set, serves MCPAddress over TLS; the files are re-read
	// when they change. Server TLS only: istiod's xds:// config source
	// client verifies the server but presents no client certificate
	// (istio pilot/pkg/bootstrap/configcontroller.go), so a ClientCAFile is
	// an error. Requires MCPAddress. Nil serves MCPAddress in plaintext.
	MCPTLS *TLSConfig
}

// Validate reports the first inconsistency of o, naming the configuration
// key of the field at fault. Run calls it before anything else.
func (o Options) Validate() error {
	if o.MCPAddress != "" && o.MCP == nil {
		return errors.New("mcp.address is set but MCP is not enabled (mcp.enabled)")
	}
	if o.MCPTLS != nil && o.MCPAddress == "" {
		return errors.New("mcp.tls is set without mcp.address: MCP on the xDS port uses xds.tls")
	}
	if o.MCPTLS != nil && o.MCPTLS.ClientCAFile != "" {
		return errors.New("mcp.tls.clientCAFile is set, but istiod's xds:// config source client cannot present " +
			"a client certificate (it supports server-verified TLS only); leave it empty and authenticate " +
			"istiod by network policy")
	}
	return nil
}

// DiscoveryServer serves Clusters, ClusterLoadAssignments and, to proxyless
// gRPC clients, Listeners and RouteConfigurations over ADS (SotW and Delta),
// generated from a ServiceSource and the endpoints it is told about through
// the serviceentry.XDSUpdater methods. Create it with NewDiscoveryServer and
// start it with Run. Safe for concurrent use.
type DiscoveryServer struct {
	src    ServiceSource
	opts   Options
	log    *slog.Logger
	shards *endpointShards
	queue  *requestQueue
	caches *caches

	pushMu sync.Mutex // serialises pushes; guards synced and the caches' content
	synced bool       // the first full push is done
	// live turns true as the first full push starts; before that, XDSUpdater
	// calls update the endpoint shards but queue no push (see queueing).
	live atomic.Bool

	seq     chan int                 // capacity 1, holds the latest push count
	pushes  int                      // guarded by pushMu
	addr    atomic.Pointer[net.Addr] // the ADS listener's
	mcpAddr atomic.Pointer[net.Addr] // the MCP listener's, with Options.MCPAddress
	serving chan struct{}
	// debounce is the live debounce (Options.Debounce*, SetDebounce).
	debounce atomic.Pointer[debounceOptions]

	// listeners are the stream callbacks of each listener, by name
	// (listenerXDS, listenerMCP); conv follows pushes to their streams;
	// tracked is the push being followed while it runs (guarded by
	// pushMu).
	listeners map[string]*callbacks
	conv      *convergence
	tracked   *trackedPush
	// scaled are the services whose assignments' weights are scaled down
	// (weights.go); guarded by pushMu.
	scaled map[model.ConfigKey]bool
	// policies are the DestinationRules and VirtualServices served
	// (policy.go); attached each source service as pushed with them (a
	// copy with its objects, or itself when it has none), valid while
	// attachedFrom is the policies pointer they were looked up in
	// (guarded by pushMu).
	policies     atomic.Pointer[Policies]
	attached     map[*model.Service]*model.Service
	attachedFrom *Policies
	// lastSrc and lastOut are the last full push's source services and
	// what it pushed for each, by index: the fast path of withPolicies.
	lastSrc, lastOut []*model.Service
}

// NewDiscoveryServer returns a server that generates from src. It starts
// nothing; XDSUpdater calls made before Run are kept and pushed by Run's first
// full push. It panics when opts.MCP is set without MCP.Validate.
func NewDiscoveryServer(src ServiceSource, opts Options) *DiscoveryServer {
	opts.Address = cmp.Or(opts.Address, "127.0.0.1:15010")
	logger := cmp.Or(opts.Logger, slog.Default()).With("component", "xds")
	subs := &substitutions{}
	var mcp *cache.MCP
	if opts.MCP != nil {
		mcp = cache.NewMCP(opts.MCP.Source, opts.MCP.Validate, logger)
	}
	s := &DiscoveryServer{
		src:     src,
		opts:    opts,
		log:     logger,
		shards:  newEndpointShards(),
		queue:   newRequestQueue(),
		caches:  newCaches(mcp, subs),
		seq:     make(chan int, 1),
		serving: make(chan struct{}),
		listeners: map[string]*callbacks{
			listenerXDS: newCallbacks(logger, listenerXDS, subs),
			listenerMCP: newCallbacks(logger, listenerMCP, subs),
		},
	}
	s.SetDebounce(Debounce{After: opts.DebounceAfter, Max: opts.DebounceMax, EDSMax: opts.DebounceEDSMax, EDS: opts.EnableEDSDebounce})
	s.conv = newConvergence(s.listeners[listenerXDS], s.listeners[listenerMCP])
	for _, set := range s.caches.generated() {
		set.observe = func(typeURL string, before uint64, update map[string]types.Resource, remove []string) {
			s.conv.expect(s.tracked, typeURL, before, update, remove)
		}
	}
	return s
}

// Debounce is the push debounce (docs/design.md §5; config keys debounce.*).
type Debounce struct {
	// After is the quiet period: a batch is pushed once no request came for
	// this long; 0 pushes at once.
	After time.Duration
	// Max caps how long requests are merged; it is at least After.
	Max time.Duration
	// EDSMax caps how long a batch of EDS-only requests is merged, so that
	// sustained endpoint churn, where the quiet period rarely comes, delays
	// an endpoint change by at most this; it is kept within [After, Max]
	// (ClampEDSMax).
	EDSMax time.Duration
	// EDS debounces EDS-only requests; false pushes them at once (Istio's
	// PILOT_ENABLE_EDS_DEBOUNCE).
	EDS bool
}

// ClampEDSMax is the rule for Debounce.EDSMax: edsMax kept within [after,
// maxDelay] (maxDelay being at least after). The configuration's default
// for an absent debounce.edsMax is its answer for 500ms.
func ClampEDSMax(edsMax, after, maxDelay time.Duration) time.Duration {
	return min(max(edsMax, after), max(maxDelay, after))
}

// options is d as the debounce loop runs it: Max at least After, EDSMax
// clamped (ClampEDSMax).
func (d Debounce) options() debounceOptions {
	maxDelay := max(d.Max, d.After)
	return debounceOptions{after: d.After, max: maxDelay, edsMax: ClampEDSMax(d.EDSMax, d.After, maxDelay), edsDebounce: d.EDS}
}

// SetDebounce changes the push debounce while the server runs (a reload
// applies debounce.*). It applies from the next request on, to xDS and MCP
// pushes.
func (s *DiscoveryServer) SetDebounce(d Debounce) {
	opts := d.options()
	s.debounce.Store(&opts)
}

// debounceOptions returns the live debounce.
func (s *DiscoveryServer) debounceOptions() debounceOptions { return *s.debounce.Load() }

// Run binds Options.Address (and Options.MCPAddress) and runs the debounce
// loop at once; when ready is closed (the aggregate registry HasSynced, or
// its sync timeout passed) it pushes everything into the caches, then
// serves ADS on those listeners until ctx is done. Serving only after that
// first full push is the sync gate (README "No partial mesh"): a grpc-go
// client treats a listener or cluster missing from a SotW response as
// deleted, and an istiod that got an empty list reports ready, so a
// restarting bridge must never answer with a partial mesh. A client that
// connects before waits, unanswered, in the listen backlog.
//
// Run must be called once. It returns an error at once for invalid Options
// (Validate), TLS files that do not load or an address it cannot bind;
// later, when serving fails, after stopping every listener. It returns nil when ctx
// ends: the ADS streams end with it (go-control-plane serves them under
// ctx), so each listener is stopped gracefully, sending GOAWAY and letting
// responses in flight finish, and hard after gracefulStopTimeout when a send
// is stuck on a client that stopped reading. Clients reconnect and get the
// full state from the next bridge.
func (s *DiscoveryServer) Run(ctx context.Context, ready <-chan struct{}) error {
	if err := s.opts.Validate(); err != nil {
		return err
	}
	ports, err := s.ports()
	if err != nil {
		return err
	}

	// Bind at once, serve when ready: a port that is taken fails the
	// bridge when it starts, not after every registry synced; a client
	// that connects meanwhile waits in the listen backlog for its first,
	// complete, answer.
	for i, p := range ports {
		lis, err := net.Listen("tcp", p.address)
		if err != nil {
			for _, q := range ports[:i] {
				_ = q.lis.Close()
			}
			return fmt.Errorf("listen on %s.address %s: %w", p.name, p.address, err)
		}
		p.lis = lis
		addr := lis.Addr()
		p.published.Store(&addr)
	}
	closeAll := func() {
		for _, p := range ports {
			_ = p.lis.Close()
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	var loop sync.WaitGroup
	defer func() {
		cancel()
		loop.Wait()
	}()
	loop.Go(func() { debounce(ctx, s.queue, s.debounceOptions, time.Now, s.push) })

	select {
	case <-ready:
	case <-ctx.Done():
		closeAll()
		return nil
	}
	s.initialPush()
	if mcp := s.caches.mcp; mcp != nil {
		mcp.RebuildAll()
		loop.Go(func() {
			mcp.Run(ctx, func() (time.Duration, time.Duration) {
				o := s.debounceOptions()
				return o.after, o.max
			})
		})
	}

	for _, p := range ports {
		p.srv, p.ads = s.newGRPCServer(ctx, p)
		s.log.Info("Serving "+p.what, "listener", p.name, "address", p.lis.Addr().String(), "tls", p.tls, "mtls", p.mtls)
	}
	close(s.serving)

	served := make(chan error, len(ports))
	for _, p := range ports {
		go func() {
			// ErrServerStopped: stopped before Serve began.
			if err := p.srv.Serve(p.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
				served <- fmt.Errorf("serve %s on %s: %w", p.what, p.lis.Addr(), err)
				return
			}
			served <- nil
		}()
	}
	pending := len(ports)
	var failed error
	select {
	case <-ctx.Done():
	case failed = <-served:
		pending--
	}
	cancel() // ends the ADS streams, so that a graceful stop returns
	var stopping sync.WaitGroup
	for _, p := range ports {
		stopping.Go(func() { stopGracefully(p.srv, gracefulStopTimeout) })
	}
	stopping.Wait()
	for range pending {
		if err := <-served; failed == nil {
			failed = err
		}
	}
	return failed
}

// gracefulStopTimeout bounds a listener's graceful stop: a response stuck
// on a client that stopped reading would otherwise hold it until keepalive
// closes that connection (40s).
const gracefulStopTimeout = 5 * time.Second

// stopGracefully stops srv with GracefulStop, and with Stop once timeout
// passed.
func stopGracefully(srv *grpc.Server, timeout time.Duration) {
	timer := time.AfterFunc(timeout, srv.Stop)
	defer timer.Stop()
	srv.GracefulStop()
}

// port is one listener of the server: the ADS port, and the MCP port with
// Options.MCPAddress.
type port struct {
	name      string // "xds" or "mcp": metric label and log field
	what      string // what it serves, for logs and errors
	address   string
	role      listenerRole
	creds     credentials.TransportCredentials // nil: plaintext
	tls, mtls bool
	published *atomic.Pointer[net.Addr] // where Addr or MCPAddr read the bound address

	lis net.Listener
	srv *grpc.Server
	ads *ads.Server // nil on the MCP listener
}

// ports returns the listeners Options ask for, their TLS files loaded.
func (s *DiscoveryServer) ports() ([]*port, error) {
	xdsPort := &port{name: listenerXDS, what: "xDS", address: s.opts.Address, role: serveXDSAndMCP, published: &s.addr}
	ports := []*port{xdsPort}
	if s.opts.MCPAddress != "" {
		xdsPort.role = serveXDSOnly
		ports = append(ports, &port{name: listenerMCP, what: "MCP", address: s.opts.MCPAddress, role: serveMCPOnly, published: &s.mcpAddr})
	}
	for _, p := range ports {
		cfg, key := s.opts.TLS, "xds.tls"
		if p.name == listenerMCP {
			cfg, key = s.opts.MCPTLS, "mcp.tls"
		}
		if cfg == nil {
			continue
		}
		log := s.log.With("listener", p.name)
		reloader, err := newTLSReloader(*cfg, log)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		p.creds = watchHandshakes(credentials.NewTLS(reloader.ServerConfig()), p.name, s.log)
		p.tls, p.mtls = true, cfg.ClientCAFile != ""
	}
	return ports, nil
}

// legacyWildcardOff are the types whose empty first request subscribes to
// nothing rather than everything, SotW and Delta alike (go-control-plane
// hands the option to both). grpc-go unsubscribes with an empty request,
// which legacy wildcard would read as "everything"; Envoy names what it
// wants for these types and asks CDS by wildcard, which therefore keeps
// legacy mode.
var legacyWildcardOff = []string{resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}

// legacyWildcard reports whether typeURL's empty first request subscribes
// to everything: every type but legacyWildcardOff's (ads.Options'
// LegacyWildcard, and the callbacks' mirrored subscriptions).
func legacyWildcard(typeURL string) bool { return !slices.Contains(legacyWildcardOff, typeURL) }

// Listener names: the listener label of
// meshbridge_xds_tls_handshake_errors_total and the listener log field.
const (
	listenerXDS = "xds"
	listenerMCP = "mcp"
)

// newGRPCServer returns a new gRPC server for p with its ADS server
// registered: meshbridge's own (package ads) on a listener that serves the
// xDS types, with go-control-plane's taking over istiod's MCP streams
// where the listener serves MCP too; go-control-plane's alone on the MCP
// listener. Only ADS is offered: proxyless gRPC, meshbridge's Envoy
// bootstrap and istiod all use it, and one stream keeps CDS and EDS
// ordered (ads rule 8; go-control-plane's ordered ADS for MCP).
func (s *DiscoveryServer) newGRPCServer(ctx context.Context, p *port) (*grpc.Server, *ads.Server) {
	log := s.log.With("listener", p.name)
	cb := s.listeners[p.name]
	gcp := func() serverv3.Server {
		return serverv3.NewServer(ctx, s.caches.forListener(p.role, log), cb.funcs(),
			sotw.WithLogger(gcpLogger(log)),
			sotw.DeactivateLegacyWildcardForTypes(legacyWildcardOff),
			sotw.WithOrderedADS(),
		)
	}
	opts := []grpc.ServerOption{
		// Find dead clients whose TCP connection did not close (Istio's
		// default keepalive for istiod's xDS port).
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	}
	opts = append(opts, TransportOptions()...)
	if p.creds != nil {
		opts = append(opts, grpc.Creds(p.creds))
	}
	if p.role == serveMCPOnly {
		srv := grpc.NewServer(opts...)
		discovery.RegisterAggregatedDiscoveryServiceServer(srv, gcp())
		return srv, nil
	}
	adsOpts := ads.Options{
		Route:          s.caches.route(p.role, log),
		LegacyWildcard: legacyWildcard,
		Hooks:          cb.hooks(),
	}
	if p.role == serveXDSAndMCP && s.caches.mcp != nil {
		adsOpts.HandOff = gcp()
	}
	as := ads.NewServer(ctx, adsOpts)
	// Pre-encoded responses (ads.Codec; requests and MCP as protobuf), and
	// streams that end with ctx.
	srv := grpc.NewServer(append(opts, as.ServerOptions()...)...)
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, as)
	return srv, as
}

// Flow-control windows of the ADS and MCP listeners (TransportOptions), in
// bytes: grpc-go's default initial stream window, and a connection window
// that lets 16 streams' windows in flight at once.
const (
	streamWindow = 64 << 10
	connWindow   = 1 << 20
)

// TransportOptions are the HTTP/2 settings of meshbridge's gRPC listeners:
// static flow-control windows (streamWindow, connWindow). An xDS stream
// receives many small requests (an ACK per response); with grpc-go's
// dynamic windows each one can start a BDP ping and a window update, which
// costs a proxyless push to ten thousand streams as much again as the
// ACKs. Static windows also bound what a client can make a connection
// buffer to connWindow, where BDP estimation lets it grow to 16 MiB.
// bench's P2 floor is served with them too, so the ratio compares servers,
// not transports.
func TransportOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.StaticStreamWindowSize(streamWindow), grpc.StaticConnWindowSize(connWindow)}
}

// Addr returns the address the ADS listener (Options.Address) is bound to,
// or nil before Run bound it (it serves once Serving is closed).
func (s *DiscoveryServer) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// MCPAddr returns the address the MCP listener (Options.MCPAddress) is bound
// to, or nil before Run bound it and without Options.MCPAddress.
func (s *DiscoveryServer) MCPAddr() net.Addr {
	if a := s.mcpAddr.Load(); a != nil {
		return *a
	}
	return nil
}

// Serving returns a channel closed once the server serves on every
// address, i.e. after the first full push.
func (s *DiscoveryServer) Serving() <-chan struct{} {
	return s.serving
}

// WaitIdle returns once every push request made so far (an XDSUpdater
// call) has been pushed, or ctx's error. It is a test hook, as
// serviceentry.Store.Flush is for the store's handlers: once both return
// with nothing changing, a new client is answered from what the server
// will keep serving. Endpoint names still being resolved (package xds/dns)
// are not its business: pipeline.Pipeline.WaitIdle waits for them first.
func (s *DiscoveryServer) WaitIdle(ctx context.Context) error {
	return s.queue.waitIdle(ctx)
}

// Sequence returns a channel that holds the number of pushes done so far
// (full and EDS, the first full push being 1), replaced after every push. It
// is a test hook for one reader: wait on it instead of sleeping.
func (s *DiscoveryServer) Sequence() <-chan int {
	return s.seq
}
