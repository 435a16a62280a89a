// Command client is the demo's proxyless gRPC client: it calls
// xds:///<host>:<port> through grpc-go's xDS resolver, reading its bootstrap
// from GRPC_XDS_BOOTSTRAP, and prints one line per call:
//
//	<RFC3339 time> ok <backend name>
//	<RFC3339 time> error <message>
//
// With -bootstrap it only prints a bootstrap for the xDS server -xds.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	_ "google.golang.org/grpc/xds" // registers the xds:/// resolver and balancers

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
	flag.Parse()
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
	cc, err := grpc.NewClient(*target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.WaitForReady(*waitForReady)))
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	defer cc.Close()
	for i := 0; *count == 0 || i < *count; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		name, err := echo.Whoami(ctx, cc)
		cancel()
		now := time.Now().UTC().Format(time.RFC3339Nano)
		if err != nil {
			fmt.Fprintf(os.Stdout, "%s error %v\n", now, err)
		} else {
			fmt.Fprintf(os.Stdout, "%s ok %s\n", now, name)
		}
		time.Sleep(*interval)
	}
}
