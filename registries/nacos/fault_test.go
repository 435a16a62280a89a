package nacos

import (
	"context"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	nacosgrpc "github.com/nacos-group/nacos-sdk-go/v2/api/grpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/proto"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// rawCodec passes gRPC messages through as bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error)      { return *v.(*[]byte), nil }
func (rawCodec) Unmarshal(data []byte, v any) error { *v.(*[]byte) = slices.Clone(data); return nil }
func (rawCodec) Name() string                       { return "proto" }

// heldAnswerProxy is a gRPC proxy in front of the real server's Nacos gRPC
// port that, once armed, holds the answer to the next request Hold picks
// (a ServiceQueryRequest of one service) until released, while everything
// else, the server's pushes included, goes through. It produces on demand
// what a real server produces only by chance: a query answered with a state
// that a push has made old by the time the answer arrives. Each client
// connection gets its own connection to the server, so that the server
// ties the subscriptions and pushes of one client together as it would.
type heldAnswerProxy struct {
	ln       net.Listener
	srv      *grpc.Server
	upstream string

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn // by the client's address
	hold  func(*nacosgrpc.Payload) bool
	// Held is closed when an answer is held, Delivered once it is sent;
	// release lets it go.
	Held, Delivered, release chan struct{}
}

func newHeldAnswerProxy(t *testing.T, upstream string) *heldAnswerProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &heldAnswerProxy{ln: ln, upstream: upstream, conns: map[string]*grpc.ClientConn{}}
	p.srv = grpc.NewServer(grpc.ForceServerCodec(rawCodec{}), grpc.UnknownServiceHandler(p.forward))
	go func() { _ = p.srv.Serve(ln) }()
	t.Cleanup(func() {
		p.Release()
		p.srv.Stop()
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, c := range p.conns {
			c.Close()
		}
	})
	return p
}

// Port is the proxy's port, for Config.GRPCPort.
func (p *heldAnswerProxy) Port() int { return p.ln.Addr().(*net.TCPAddr).Port }

// Arm holds the answer to the next request hold accepts.
func (p *heldAnswerProxy) Arm(hold func(*nacosgrpc.Payload) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.hold = hold
	p.Held, p.Delivered, p.release = make(chan struct{}), make(chan struct{}), make(chan struct{})
}

// Release lets the held answer go.
func (p *heldAnswerProxy) Release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.release != nil {
		close(p.release)
		p.release = nil
	}
}

// upstreamFor is the server connection of the client whose stream ctx is.
func (p *heldAnswerProxy) upstreamFor(ctx context.Context) (*grpc.ClientConn, error) {
	client := ""
	if pr, ok := peer.FromContext(ctx); ok {
		client = pr.Addr.String()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if c := p.conns[client]; c != nil {
		return c, nil
	}
	c, err := grpc.NewClient(p.upstream, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})))
	if err != nil {
		return nil, err
	}
	p.conns[client] = c
	return c, nil
}

// forward relays one stream, unary or not, to the server and back.
func (p *heldAnswerProxy) forward(_ any, in grpc.ServerStream) error {
	ctx := in.Context()
	method, _ := grpc.MethodFromServerStream(in)
	conn, err := p.upstreamFor(ctx)
	if err != nil {
		return err
	}
	md, _ := metadata.FromIncomingContext(ctx)
	ctx, cancel := context.WithCancel(metadata.NewOutgoingContext(ctx, md))
	defer cancel()
	out, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true, ClientStreams: true}, method)
	if err != nil {
		return err
	}
	var held chan struct{} // set by the client's first message when it is the one to hold
	var heldMu sync.Mutex
	up := make(chan error, 1)
	go func() {
		for {
			var msg []byte
			if err := in.RecvMsg(&msg); err != nil {
				_ = out.CloseSend()
				up <- nil
				return
			}
			var pl nacosgrpc.Payload
			if proto.Unmarshal(msg, &pl) == nil {
				p.mu.Lock()
				if p.hold != nil && p.hold(&pl) {
					p.hold = nil
					heldMu.Lock()
					held = make(chan struct{})
					heldMu.Unlock()
				}
				p.mu.Unlock()
			}
			if err := out.SendMsg(&msg); err != nil {
				up <- err
				return
			}
		}
	}()
	for {
		var msg []byte
		if err := out.RecvMsg(&msg); err != nil {
			if err == io.EOF {
				return <-up
			}
			return err
		}
		heldMu.Lock()
		hold := held != nil
		held = nil
		heldMu.Unlock()
		if hold {
			p.mu.Lock()
			heldCh, release, delivered := p.Held, p.release, p.Delivered
			p.mu.Unlock()
			close(heldCh)
			if release != nil {
				<-release
			}
			err := in.SendMsg(&msg)
			close(delivered)
			if err != nil {
				return err
			}
			continue
		}
		if err := in.SendMsg(&msg); err != nil {
			return err
		}
	}
}

// TestQueryAnswerOlderThanAPushIsDropped: a reconcile query of a service
// is answered with both its instances, and that answer is held while one
// instance is deregistered and the server pushes the service without it;
// the held answer, older than the push, then arrives and is dropped (doc.go
// rule 4): the deregistered instance never comes back.
func TestQueryAnswerOlderThanAPushIsDropped(t *testing.T) {
	p := harness.StartNacos(t)
	p.RegisterInstance(t, "", "", "web", "10.0.9.1", 80, 1, nil, true, true, true)
	p.RegisterInstance(t, "", "", "web", "10.0.9.2", 80, 1, nil, true, true, true)
	waitListed(t, p, "", "", "web")
	proxy := newHeldAnswerProxy(t, "127.0.0.1:"+strconv.Itoa(p.GRPCPort()))
	_, rec := runRegistry(t, Config{Addresses: []string{p.Address()}, GRPCPort: proxy.Port(),
		ReconcileInterval: time.Second}, nil)
	k := key("public", DefaultGroup, "web")
	rec.Eventually(t, "Synced with both instances", func(st registrytest.State) bool {
		return st.Synced == 1 && len(st.Addrs(k)) == 2
	})
	proxy.Arm(func(pl *nacosgrpc.Payload) bool {
		return pl.GetMetadata().GetType() == "ServiceQueryRequest" && strings.Contains(string(pl.GetBody().GetValue()), `"web"`)
	})
	registrytest.WaitClosed(t, proxy.Held, "a reconcile query's answer held")
	p.DeregisterInstance(t, "", "", "web", "10.0.9.2", 80, true)
	rec.Eventually(t, "the push without 10.0.9.2", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(k), []string{"10.0.9.1:80"})
	})
	pushed := len(rec.Snapshots())
	proxy.Release()
	registrytest.WaitClosed(t, proxy.Delivered, "the held answer delivered")
	// A later change, to know the registry handled the held answer.
	p.RegisterInstance(t, "", "", "web", "10.0.9.3", 80, 1, nil, true, true, true)
	rec.Eventually(t, "the push with 10.0.9.3", func(st registrytest.State) bool {
		return slices.Equal(st.Addrs(k), []string{"10.0.9.1:80", "10.0.9.3:80"})
	})
	for _, s := range rec.Snapshots()[pushed:] {
		for _, in := range s.Service.Instances {
			if in.Address == "10.0.9.2" {
				t.Errorf("snapshot %+v brought the deregistered 10.0.9.2 back", s)
			}
		}
	}
}
