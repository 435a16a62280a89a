package nacos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nacos-group/nacos-sdk-go/v2/common/constant"
	"github.com/nacos-group/nacos-sdk-go/v2/common/nacos_server"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_request"
	"github.com/nacos-group/nacos-sdk-go/v2/common/remote/rpc/rpc_response"
	"github.com/nacos-group/nacos-sdk-go/v2/common/security"
	nacosmodel "github.com/nacos-group/nacos-sdk-go/v2/model"
)

// requestTimeoutMs bounds one gRPC request, retries inside the SDK included
// (rpc.RpcClient.Request tries up to 3 times within it).
const requestTimeoutMs = 5000

// listPageSize is the page size of a service listing. Polaris's paging is
// not stable across pages, so a listing that takes several pages and comes
// up short of the server's count is partial (doc.go rule 3).
const listPageSize = 1000

// appName is sent as the subscriber's application (header "app"), as
// nacos-sdk-go sends ClientConfig.AppName.
const appName = "meshbridge"

// sdkClientMu serializes creating and shutting down SDK RPC clients:
// nacos-sdk-go v2.3.5 keeps them in a package map that rpc.CreateClient
// locks and RpcClient.Shutdown does not.
var sdkClientMu sync.Mutex

// clientSeq makes every SDK RPC client name unique (rpc.CreateClient returns
// an existing client of the same name).
var clientSeq atomic.Uint64

// conn is one namespace's gRPC connection to Nacos, built from nacos-sdk-go's
// transport (nacos_server.NacosServer for the server list and the login,
// rpc.RpcClient for the connection, its reconnects and server pushes)
// without its naming client (doc.go rule 2).
type conn struct {
	namespace string
	server    *nacos_server.NacosServer
	rpc       *rpc.RpcClient
	cancel    context.CancelFunc
	// up is set once the connection was seen up: such a conn is replaced
	// when it goes down (nsWatcher.runWatchdog).
	up atomic.Bool
	// connects counts the SDK's connected events; settled is set once
	// settle ran, and from then on each event reaches hooks.connected.
	connects atomic.Int32
	settled  atomic.Bool
	hooks    connHooks
	// inFlight is held for reading by every request and for writing by
	// close: nacos-sdk-go v2.3.5's RpcClient.Request reads the client's
	// status unsynchronized while it waits for a reconnect, and Shutdown
	// writes it, so a shutdown waits for the requests in flight (at most
	// requestTimeoutMs).
	inFlight sync.RWMutex
	// why is the last diagnosis of a down connection (setWhy).
	why atomic.Pointer[error]
}

// connHooks are called from the SDK's goroutines and must not block.
type connHooks struct {
	// push receives a service pushed by the server.
	push func(nacosmodel.Service)
	// connected is called after every connection the SDK makes.
	connected func()
}

// dial builds the connection of one namespace and connects it. Connecting
// tries each server a few times (rpc.RpcClient.Start); when that fails the
// connection is returned anyway, and the SDK keeps reconnecting in the
// background (connected tells when it succeeds).
func dial(reg *Registry, namespace string, hooks connHooks) (*conn, error) {
	ctx, cancel := context.WithCancel(context.Background())
	clientCfg := reg.clientConfig(namespace)
	srv, err := nacos_server.NewNacosServer(ctx, reg.serverConfigs(), clientCfg, reg.agent, requestTimeoutMs, "", nil)
	if err != nil {
		cancel()
		return nil, err
	}
	labels := map[string]string{
		constant.LABEL_SOURCE: constant.LABEL_SOURCE_SDK,
		constant.LABEL_MODULE: constant.LABEL_MODULE_NAMING,
	}
	name := "meshbridge-" + reg.cfg.Name + "-" + namespace + "-" + strconv.FormatUint(clientSeq.Add(1), 10)
	tlsCfg := clientCfg.TLSCfg // the SDK keeps and may modify a pointer to it
	sdkClientMu.Lock()
	ic, err := rpc.CreateClient(ctx, name, rpc.GRPC, labels, srv, &tlsCfg, nil)
	sdkClientMu.Unlock()
	if err != nil {
		cancel()
		return nil, err
	}
	rc := ic.GetRpcClient()
	c := &conn{namespace: namespace, server: srv, rpc: rc, cancel: cancel, hooks: hooks}
	rc.RegisterServerRequestHandler(func() rpc_request.IRequest {
		return &rpc_request.NotifySubscriberRequest{NamingRequest: &rpc_request.NamingRequest{}}
	}, pushHandler{hooks.push})
	rc.RegisterConnectionListener(connListener{func() {
		c.connects.Add(1)
		if c.settled.Load() {
			c.up.Store(true)
			hooks.connected()
		}
	}})
	rc.Start()
	return c, nil
}

// settle makes sure the server registered the new connection before it is
// used, and reports whether it did: a request on a connection the server
// has not registered yet is answered "Connection is unregistered" (error
// 301), on which nacos-sdk-go reconnects by itself (the racy reconnect
// rule 1 avoids). v2.3.5 waits a fixed 100 ms after its connection setup,
// which a busy server outlasts. A HealthCheckRequest answered without a
// reconnect of the SDK's in between says the connection is registered;
// false means the caller closes this connection and dials a new one. Either
// way the connection is settled afterwards: the SDK's connected events
// reach hooks.connected, once now when it is up.
func (c *conn) settle(ctx context.Context) bool {
	ok := true
	if c.connected() {
		// The probe's "Connection is unregistered" would set the SDK
		// reconnecting, which races with its own goroutines: give the
		// server time to register the connection first.
		select {
		case <-ctx.Done():
		case <-time.After(settleDelay):
		}
		before := c.connects.Load()
		err := c.healthCheck()
		ok = !(isUnregistered(err) || c.connects.Load() != before)
	}
	c.settled.Store(true)
	if ok && c.connected() {
		c.up.Store(true)
		c.hooks.connected()
	}
	return ok
}

// settleDelay is how long settle waits on a new connection before its
// probe: the server registers a connection when it handles its setup, which
// nacos-sdk-go gives 100 ms; a busy server takes longer. Paid once per
// connection, not per request.
const settleDelay = time.Second

// isUnregistered reports an answer "Connection is unregistered" (Nacos's
// error 301, nacos-sdk-go's constant.UN_REGISTER), which the SDK returns as
// an error carrying the server's message.
func isUnregistered(err error) bool {
	var se *serverError
	return err != nil && (errors.As(err, &se) && se.code == constant.UN_REGISTER ||
		strings.Contains(err.Error(), "Connection is unregistered"))
}

// connected reports whether the gRPC connection is up (an atomic load in
// the SDK: seeing it up orders every later read of the SDK's current
// connection after the write that installed it).
func (c *conn) connected() bool { return c.rpc.IsRunning() }

// close shuts the connection down; the SDK's goroutines end with it.
func (c *conn) close() {
	c.inFlight.Lock()
	sdkClientMu.Lock()
	c.rpc.Shutdown()
	sdkClientMu.Unlock()
	c.inFlight.Unlock()
	c.cancel()
}

// errNotConnected is the error of a request while the connection is down.
var errNotConnected = errors.New("not connected to the Nacos gRPC port")

// notConnected is the error of a request while the connection is down:
// errNotConnected, with the last diagnosis of why (setWhy) and the
// request's own error when it has one.
func (c *conn) notConnected(err error) error {
	e := errNotConnected
	if why := c.why.Load(); why != nil {
		e = fmt.Errorf("%w: %v", e, *why)
	}
	if err != nil {
		e = fmt.Errorf("%w (%v)", e, err)
	}
	return e
}

// setWhy records why the connection is down (Registry.probeGRPCPorts: the
// SDK only logs its dial errors, such as an untrusted certificate); nil
// clears it.
func (c *conn) setWhy(err error) {
	if err == nil {
		c.why.Store(nil)
		return
	}
	c.why.Store(&err)
}

// request sends req with the login's access token (and RAM signature) and
// returns the response, or an error when the request failed or the server
// refused it. nacos-sdk-go's naming client ignores a refusal that comes as
// the expected response type with a result code other than 200 (Nacos's
// auth filter answers that way), and would hand on its empty service list:
// here it is an error.
//
// A request is sent only while the connection is up: rpc.RpcClient.Request
// reads the SDK's current connection unsynchronized, and only the SDK's
// atomic status orders that read after a reconnect's write.
func (c *conn) request(req rpc_request.IRequest) (rpc_response.IResponse, error) {
	if !c.connected() {
		return nil, c.notConnected(nil)
	}
	c.server.InjectSecurityInfo(req.GetHeaders(), security.BuildNamingResourceByRequest(req))
	c.inFlight.RLock()
	resp, err := c.rpc.Request(req, requestTimeoutMs)
	c.inFlight.RUnlock()
	if err != nil {
		if !c.connected() {
			return nil, c.notConnected(err)
		}
		return nil, err
	}
	if resp.GetResultCode() != constant.RESPONSE_CODE_SUCCESS {
		return nil, &serverError{code: resp.GetErrorCode(), result: resp.GetResultCode(), msg: resp.GetMessage()}
	}
	return resp, nil
}

// serverError is a request the server answered with a failure.
type serverError struct {
	code, result int
	msg          string
}

func (e *serverError) Error() string {
	return fmt.Sprintf("Nacos refused the request: result %d, error %d: %s", e.result, e.code, e.msg)
}

// forbidden reports a refusal by Nacos's auth (NacosException.NO_RIGHT 403,
// or 401).
func (e *serverError) forbidden() bool { return e.code == 403 || e.code == 401 }

// listServices returns the names of a group's services, reading every page.
// partial is true when the listing took several pages and holds fewer names
// than the server counted. Empty names (Polaris pads pages with them) are
// dropped.
func (c *conn) listServices(group string) (names []string, partial bool, err error) {
	seen := map[string]bool{}
	count := 0
	pages := 0
	for page := 1; ; page++ {
		resp, err := c.request(rpc_request.NewServiceListRequest(c.namespace, "", group, page, listPageSize, ""))
		if err != nil {
			return nil, false, fmt.Errorf("list services of group %q: %w", group, err)
		}
		lr, ok := resp.(*rpc_response.ServiceListResponse)
		if !ok {
			return nil, false, fmt.Errorf("list services of group %q: unexpected response %T", group, resp)
		}
		pages++
		count = lr.Count
		for _, n := range lr.ServiceNames {
			if n != "" && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		if len(lr.ServiceNames) < listPageSize || len(names) >= count || page >= 1000 {
			break
		}
	}
	return names, pages > 1 && len(names) < count, nil
}

// subscribe subscribes to a service's pushes and returns its current state.
func (c *conn) subscribe(group, name string) (nacosmodel.Service, error) {
	req := rpc_request.NewSubscribeServiceRequest(c.namespace, name, group, "", true)
	req.Headers["app"] = appName
	resp, err := c.request(req)
	if err != nil {
		return nacosmodel.Service{}, fmt.Errorf("subscribe: %w", err)
	}
	sr, ok := resp.(*rpc_response.SubscribeServiceResponse)
	if !ok {
		return nacosmodel.Service{}, fmt.Errorf("subscribe: unexpected response %T", resp)
	}
	return sr.ServiceInfo, nil
}

// unsubscribe ends a service's pushes.
func (c *conn) unsubscribe(group, name string) error {
	req := rpc_request.NewSubscribeServiceRequest(c.namespace, name, group, "", false)
	req.Headers["app"] = appName
	_, err := c.request(req)
	return err
}

// query reads a service's current state from the server, all clusters,
// healthy or not (the reconcile; the SDK's ServiceInfoUpdater sends the
// same request).
func (c *conn) query(group, name string) (nacosmodel.Service, error) {
	resp, err := c.request(rpc_request.NewServiceQueryRequest(c.namespace, name, group, "", false, 0))
	if err != nil {
		return nacosmodel.Service{}, fmt.Errorf("query: %w", err)
	}
	qr, ok := resp.(*rpc_response.QueryServiceResponse)
	if !ok {
		return nacosmodel.Service{}, fmt.Errorf("query: unexpected response %T", resp)
	}
	return qr.ServiceInfo, nil
}

// pushHandler hands a server push to the registry and acknowledges it. It
// runs on the SDK's stream goroutine: push must not block.
type pushHandler struct{ push func(nacosmodel.Service) }

func (pushHandler) Name() string { return "meshbridge-naming-push" }

func (h pushHandler) RequestReply(req rpc_request.IRequest, _ *rpc.RpcClient) rpc_response.IResponse {
	n, ok := req.(*rpc_request.NotifySubscriberRequest)
	if !ok {
		return nil
	}
	h.push(n.ServiceInfo)
	return &rpc_response.NotifySubscriberResponse{
		Response: &rpc_response.Response{ResultCode: constant.RESPONSE_CODE_SUCCESS, Success: true},
	}
}

// connListener tells the registry about every connection; it runs on the
// SDK's event goroutine.
type connListener struct{ connected func() }

func (l connListener) OnConnected()  { l.connected() }
func (l connListener) OnDisConnect() {}

// splitServiceName splits a service name the server may send grouped
// ("group@@service") into group and name; group is "" when it is not.
func splitServiceName(s string) (group, name string) {
	if g, n, ok := strings.Cut(s, constant.SERVICE_INFO_SPLITER); ok {
		return g, n
	}
	return "", s
}
