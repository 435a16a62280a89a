package harness

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// This file runs the Apache Dubbo (Java) test provider (tools/dubbo-java,
// built by tools/build.sh dubbo-java): Dubbo 3.3.6 with DubboBootstrap, the
// same GreetService as the dubbo-go provider (google.protobuf.StringValue in
// and out, over Triple unwrapped, so gRPC clients call it), registering in
// ZooKeeper (Curator 5) or Nacos.
//
// What Dubbo Java does that tests must expect:
//   - It never registers a loopback address (DUBBO_IP_TO_REGISTRY=127.0.0.1
//     aborts; a 127.0.0.1 protocol host binds 0.0.0.0 and registers the
//     NIC's address), so it runs only in the test binary's own network
//     namespace (RequireNetNS), bound to and registering NetNSAddress; the
//     test's ZooKeeper, bridge and clients run there too.
//   - Provider URLs carry no pid, anyhost, weight (unless set), category or
//     enabled; timestamp is in ms; they add dubbo=2.0.2, release=3.3.6,
//     generic, dynamic, deprecated, revision, metadata-type,
//     prefer.serialization=hessian2,fastjson2 and service-name-mapping. At
//     application level one instance is registered for all protocols
//     (/services/<app>/<ip>:<first port>), its metadata meta-v, timestamp
//     and dubbo.metadata.storage-type beside dubbo.endpoints and
//     dubbo.metadata.revision.
//   - Remote metadata goes to /dubbo/metadata/<app>/<revision> in ZooKeeper
//     (dubbo-go writes /dubbo/<app>/<revision>).
//   - SIGTERM removes its nodes at once; SIGKILL leaves them to its
//     session's expiry (it asks for 60 s; StartZooKeeper caps it at 4 s).

// dubboJavaMain is tools/dubbo-java's main class.
const dubboJavaMain = "io.meshbridge.dubbo.Provider"

// StartDubboJavaProvider starts the Apache Dubbo (Java) test provider with
// opts (Register "interface", "application" or "both", as for
// StartDubboProvider; Namespace is not supported) and returns it once it
// printed "provider ready". It needs the test binary's own network
// namespace and tools/build.sh dubbo-java's build
// ($MESHBRIDGE_DUBBO_JAVA_DIR). Ports left 0 are picked free. The test's
// cleanup stops it.
func StartDubboJavaProvider(t testing.TB, opts DubboProviderOptions) *DubboProvider {
	t.Helper()
	RequireNetNS(t, "dubbo-java")
	cp := JavaPeerClasspath(t, "dubbo-java", "MESHBRIDGE_DUBBO_JAVA_DIR")
	java := javaPath(t, "dubbo-java")
	if opts.Namespace != "" {
		t.Fatal("StartDubboJavaProvider: a Nacos namespace is not supported")
	}
	o, err := opts.resolve(t)
	if err == nil {
		err = dubboJavaInterface(o)
	}
	if err != nil {
		t.Fatalf("dubbo provider options: %v", err)
	}
	dir := t.TempDir()
	args := append(slices.Clone(javaJVMFlags), "-Duser.home="+dir, "-cp", cp, dubboJavaMain)
	args = append(args, o.javaArgs()...)
	p := &DubboProvider{
		srv: server{
			name:         "dubbo-java-provider",
			bin:          java,
			args:         args,
			dir:          dir,
			log:          filepath.Join(dir, "dubbo-java-provider.log"),
			tailLines:    40,
			readyTimeout: nacosReadyTimeout, // a JVM with Dubbo's classes: seconds idle, longer busy
		},
		opts: o,
		host: NetNSAddress,
	}
	p.srv.stopAtEnd(t)
	p.srv.start(t, o.Registry, p.ready)
	return p
}

// javaArgs are the Java provider's flags for o (resolved).
func (o DubboProviderOptions) javaArgs() []string {
	mode := map[string]string{"interface": "interface", "application": "instance", "both": "all"}[o.Register]
	a := []string{
		"-registry", o.Registry,
		"-register", mode,
		"-app", o.App,
		"-host", NetNSAddress,
		"-protocols", strings.Join(o.Protocols, ","),
		"-metadata", o.MetadataType,
	}
	add := func(flag, v string) {
		if v != "" && v != "0" {
			a = append(a, flag, v)
		}
	}
	add("-group", o.Group)
	add("-version", o.Version)
	for _, proto := range o.Protocols {
		switch proto {
		case "tri":
			add("-tri-port", strconv.Itoa(o.TriPort))
		case "dubbo":
			add("-dubbo-port", strconv.Itoa(o.DubboPort))
		}
	}
	if o.MetadataType == "local" {
		add("-metadata-port", strconv.Itoa(o.MetadataPort))
	}
	add("-weight", strconv.FormatInt(o.Weight, 10))
	for _, k := range slices.Sorted(maps.Keys(o.Params)) {
		a = append(a, "-param", k+"="+o.Params[k])
	}
	add("-greet-delay-ms", strconv.FormatInt(o.GreetDelay.Milliseconds(), 10))
	return a
}

// dubboJavaInterface checks that o asks for the one interface the Java
// provider serves, org.apache.dubbo.demo.GreetService.
func dubboJavaInterface(o DubboProviderOptions) error {
	if o.Interface != "org.apache.dubbo.demo.GreetService" {
		return fmt.Errorf("interface %q: the Java provider serves org.apache.dubbo.demo.GreetService only", o.Interface)
	}
	return nil
}
