package xds

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"github.com/envoyproxy/go-control-plane/pkg/server/sotw/v3"
	serverv3 "github.com/envoyproxy/go-control-plane/pkg/server/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/keepalive"

	"github.com/meshbridge/meshbridge/model"
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
	// DebounceAfter is the quiet period before a push; default 100ms.
	DebounceAfter time.Duration
	// DebounceMax caps how long requests are merged; default 10s.
	DebounceMax time.Duration
	// EnableEDSDebounce debounces EDS-only pushes like full ones; when false
	// they are pushed at once.
	EnableEDSDebounce bool
	// Logger receives the server's logs; default slog.Default().
	Logger *slog.Logger
	// TLS, when set, serves the port over TLS, with mTLS when it names a
	// client CA; the files are re-read when they change. Nil serves
	// plaintext (the default, for loopback).
	TLS *TLSConfig
	// MCP, when set, also answers istiod's MCP type URLs on the ADS port
	// from MCP.Source (mcp.go, issue 5). Nil serves no MCP: MCP type URLs
	// end the stream like any other unserved type.
	MCP *MCPOptions
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

	seq    chan int // capacity 1, holds the latest push count
	pushes int      // guarded by pushMu
	// services indexes the last full push's services by ConfigKey; guarded
	// by pushMu.
	services map[model.ConfigKey]*model.Service
	addr     atomic.Pointer[net.Addr]
	serving  chan struct{}
}

// NewDiscoveryServer returns a server that generates from src. It starts
// nothing; XDSUpdater calls made before Run are kept and pushed by Run's first
// full push.
func NewDiscoveryServer(src ServiceSource, opts Options) *DiscoveryServer {
	opts.Address = cmp.Or(opts.Address, "127.0.0.1:15010")
	opts.DebounceAfter = cmp.Or(opts.DebounceAfter, 100*time.Millisecond)
	opts.DebounceMax = cmp.Or(opts.DebounceMax, 10*time.Second)
	logger := cmp.Or(opts.Logger, slog.Default()).With("component", "xds")
	var mcp *mcpCache
	if opts.MCP != nil {
		mcp = newMCPCache(opts.MCP.Source, logger)
	}
	return &DiscoveryServer{
		src:     src,
		opts:    opts,
		log:     logger,
		shards:  newEndpointShards(),
		queue:   newRequestQueue(),
		caches:  newCaches(gcpLogger(logger), mcp),
		seq:     make(chan int, 1),
		serving: make(chan struct{}),
	}
}

// Run runs the debounce loop at once; when ready is closed (the aggregate
// registry HasSynced, or its sync timeout passed) it pushes everything into
// the caches, then listens on Options.Address and serves ADS until ctx is
// done. Listening only after that first full push is the gate of issue 2: a
// grpc-go client treats a listener or cluster missing from a SotW response as
// deleted, so a restarting bridge must never answer with a partial mesh.
//
// Run must be called once. It returns nil when ctx ends, or an error when it cannot listen or serving
// fails. On return the gRPC server is stopped with Stop, not GracefulStop:
// ADS streams never end on their own, so GracefulStop would wait for every
// client to hang up (Contour cmd/contour/serve.go makes the same call); the
// clients reconnect and get the full state from the next bridge.
func (s *DiscoveryServer) Run(ctx context.Context, ready <-chan struct{}) error {
	ctx, cancel := context.WithCancel(ctx)
	var loop sync.WaitGroup
	defer func() {
		cancel()
		loop.Wait()
	}()
	loop.Go(func() {
		opts := debounceOptions{after: s.opts.DebounceAfter, max: s.opts.DebounceMax, edsDebounce: s.opts.EnableEDSDebounce}
		debounce(ctx, s.queue, opts, time.Now, s.push)
	})

	select {
	case <-ready:
	case <-ctx.Done():
		return nil
	}
	s.initialPush()
	if mcp := s.caches.mcp; mcp != nil {
		mcp.rebuildAll()
		loop.Go(func() { mcp.run(ctx, s.opts.DebounceAfter, s.opts.DebounceMax) })
	}

	var creds []grpc.ServerOption
	if s.opts.TLS != nil {
		reloader, err := newTLSReloader(*s.opts.TLS, s.log)
		if err != nil {
			return err
		}
		creds = append(creds, grpc.Creds(credentials.NewTLS(reloader.ServerConfig())))
	}
	lis, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("listen for xDS on %s: %w", s.opts.Address, err)
	}
	srv := s.newGRPCServer(ctx, creds...)
	addr := lis.Addr()
	s.addr.Store(&addr)
	close(s.serving)
	s.log.Info("Serving xDS", "address", addr.String())

	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	select {
	case <-ctx.Done():
		srv.Stop()
		<-served
		return nil
	case err := <-served:
		return fmt.Errorf("serve xDS on %s: %w", addr, err)
	}
}

// newGRPCServer registers go-control-plane's ADS server on a new gRPC server.
// Only ADS is offered: proxyless gRPC and meshbridge's Envoy bootstrap both use
// it, and one stream keeps CDS and EDS ordered.
func (s *DiscoveryServer) newGRPCServer(ctx context.Context, extra ...grpc.ServerOption) *grpc.Server {
	xdsServer := serverv3.NewServer(ctx, s.caches.mux, newCallbacks(s.log).funcs(),
		sotw.WithLogger(gcpLogger(s.log)),
		// grpc-go unsubscribes with an empty request, which legacy wildcard
		// would read as "everything"; Envoy names what it wants for these
		// types and asks CDS by wildcard, which therefore keeps legacy mode.
		sotw.DeactivateLegacyWildcardForTypes([]string{resourcev3.EndpointType, resourcev3.ListenerType, resourcev3.RouteType}),
	)
	srv := grpc.NewServer(append([]grpc.ServerOption{
		// Bound concurrent stream sends; a slow client holds a slot for at
		// most slowSendAfter (sends.go).
		grpc.ChainStreamInterceptor(newSendLimiter(defaultMaxSends(), slowSendAfter).intercept),
		// Find dead clients whose TCP connection did not close (Istio's
		// default keepalive for istiod's xDS port).
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 15 * time.Second, PermitWithoutStream: true}),
	}, extra...)...)
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, xdsServer)
	return srv
}

// Addr returns the address the server listens on, or nil before it listens.
func (s *DiscoveryServer) Addr() net.Addr {
	if a := s.addr.Load(); a != nil {
		return *a
	}
	return nil
}

// Serving returns a channel closed once the server listens, i.e. after the
// first full push.
func (s *DiscoveryServer) Serving() <-chan struct{} {
	return s.serving
}

// Sequence returns a channel that holds the number of pushes done so far
// (full and EDS, the first full push being 1), replaced after every push. It
// is a test hook for one reader: wait on it instead of sleeping.
func (s *DiscoveryServer) Sequence() <-chan int {
	return s.seq
}
