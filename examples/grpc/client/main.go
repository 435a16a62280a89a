// Command client is the demo's proxyless gRPC client: it calls
// xds:///<host>:<port> through grpc-go's xDS resolver, reading its bootstrap
// from GRPC_XDS_BOOTSTRAP, and prints one line per call:
//
//	<RFC3339 time> ok <backend name>
//	<RFC3339 time> error <message>
//
// It calls the echo service's Whoami, or with -method any unary method that
// takes and returns google.protobuf.StringValue (a Dubbo triple provider's,
// e.g. /org.apache.dubbo.demo.GreetService/Greet), sending -message and the
// -header metadata (tri-service-version=1.0.0 for a versioned Dubbo
// service), and printing the reply's value instead of a backend name.
// With -concurrency K, K calls are in flight at once. With -xds-creds the
// channel applies the TLS its clusters carry (xDS credentials, gRFC A29,
// certificates from the bootstrap's certificate provider), and plaintext
// where a cluster carries none.
//
// With -bootstrap it only prints a bootstrap for the xDS server -xds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	xdscreds "google.golang.org/grpc/credentials/xds"
	"google.golang.org/grpc/metadata"
	_ "google.golang.org/grpc/xds" // registers the xds:/// resolver and balancers
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshbridge/meshbridge/examples/grpc/echo"
)

func main() {
	target := flag.String("target", "", "target, e.g. xds:///echo.service.consul:8080")
	interval := flag.Duration("interval", 200*time.Millisecond, "pause between calls")
	count := flag.Int("count", 0, "calls to make; 0 = until killed")
	timeout := flag.Duration("timeout", 2*time.Second, "per-call deadline")
	bootstrap := flag.Bool("bootstrap", false, "print a bootstrap for -xds and exit")
	xdsAddr := flag.String("xds", "127.0.0.1:15010", "xDS server address, with -bootstrap")
	waitForReady := flag.Bool("wait-for-ready", false, "block each call until the channel is ready (instead of failing fast)")
	method := flag.String("method", "", "full method name of a unary StringValue → StringValue method to call instead of Whoami")
	message := flag.String("message", "meshbridge", "the StringValue sent with -method")
	var headers headerFlags
	flag.Var(&headers, "header", "request metadata key=value (repeatable)")
	cycle := flag.String("cycle-header", "", "name=N: send header name with value v<i mod N> on call i (0, 1, …), to spread calls over N hash keys")
	concurrency := flag.Int("concurrency", 1, "calls in flight at once: this many loops share the -count calls, each pausing -interval after its call")
	useXDSCreds := flag.Bool("xds-creds", false, "apply the TLS the xDS clusters carry (gRFC A29), plaintext where they carry none")
	flag.Parse()
	cycleName, cycleN, err := parseCycle(*cycle)
	if err != nil {
		log.Fatalf("-cycle-header: %v", err)
	}
	if *bootstrap {
		b, err := echo.Bootstrap(*xdsAddr, "meshbridge-demo-client")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Println(string(b))
		return
	}
	if *target == "" {
		log.Fatal("-target is required")
	}
	creds := insecure.NewCredentials()
	if *useXDSCreds {
		if creds, err = xdscreds.NewClientCredentials(xdscreds.ClientOptions{FallbackCreds: insecure.NewCredentials()}); err != nil {
			log.Fatalf("xDS credentials: %v", err)
		}
	}
	cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(*waitForReady)))
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	defer cc.Close()
	if *concurrency < 1 {
		log.Fatal("-concurrency must be at least 1")
	}
	var (
		next atomic.Int64 // the next call's number
		out  sync.Mutex   // one line per call
		wg   sync.WaitGroup
	)
	for range *concurrency {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if *count != 0 && i >= *count {
					return
				}
				ctx, cancel := context.WithTimeout(context.Background(), *timeout)
				md := metadata.MD(headers).Copy()
				if cycleN > 0 {
					md.Set(cycleName, fmt.Sprintf("v%d", i%cycleN))
				}
				ctx = metadata.NewOutgoingContext(ctx, md)
				var (
					name string
					err  error
				)
				if *method != "" {
					reply := &wrapperspb.StringValue{}
					err = cc.Invoke(ctx, *method, wrapperspb.String(*message), reply)
					name = reply.GetValue()
				} else {
					name, err = echo.Whoami(ctx, cc)
				}
				cancel()
				now := time.Now().UTC().Format(time.RFC3339Nano)
				out.Lock()
				if err != nil {
					fmt.Fprintf(os.Stdout, "%s error %v\n", now, err)
				} else {
					fmt.Fprintf(os.Stdout, "%s ok %s\n", now, name)
				}
				out.Unlock()
				time.Sleep(*interval)
			}
		})
	}
	wg.Wait()
}

// parseCycle parses -cycle-header's "name=N" ("" is none: N is 0).
func parseCycle(v string) (name string, n int, err error) {
	if v == "" {
		return "", 0, nil
	}
	name, count, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return "", 0, fmt.Errorf("%q is not name=N", v)
	}
	if n, err = strconv.Atoi(count); err != nil || n < 1 {
		return "", 0, fmt.Errorf("%q: N is not a positive number", v)
	}
	return strings.ToLower(name), n, nil
}

// headerFlags collects -header key=value flags as gRPC metadata.
type headerFlags map[string][]string

func (h *headerFlags) String() string { return fmt.Sprint(map[string][]string(*h)) }

func (h *headerFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok || k == "" {
		return fmt.Errorf("%q is not key=value", v)
	}
	if *h == nil {
		*h = headerFlags{}
	}
	k = strings.ToLower(k)
	(*h)[k] = append((*h)[k], val)
	return nil
}
