package harness

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file runs the Eureka server Spring Cloud users run: Spring Cloud
// Netflix's Eureka server 4.3.0 (eureka-core 2.0.4) on Spring Boot 3.5.7
// (tools/eureka, built by tools/build.sh eureka), one peer (StartEureka) or
// n peers replicating to each other (StartEurekaPeers), each on 127.0.0.1
// and a free port, its REST API under http://127.0.0.1:PORT/eureka/.
//
// What the harness sets, and why (system properties; Eureka.properties):
//   - server.address=127.0.0.1, no other listener. eureka.server.my-url is
//     the peer's own URL: Eureka drops from its peers every service URL
//     "of this host" (the host of the URL equals its own hostname), and
//     every peer here is 127.0.0.1; with my-url only the exact own URL is
//     dropped. A single peer lists only itself in defaultZone, so that it
//     never replicates to Eureka's default http://localhost:8761/eureka/
//     (another test's port, maybe).
//   - eureka.client.register-with-eureka=false: the servers do not register
//     themselves (no EUREKA application in the listings);
//     fetch-registry=true with peers and registry-sync-retries=1 (Spring's
//     default is 0): a peer that restarts copies the others' registry at
//     start (Restart); else it would start empty and get back only the
//     instances whose heartbeats it sees replicated (a 404 makes the peer
//     that took the heartbeat replicate the register).
//   - For speed (test-only; production keeps the defaults):
//     use-read-only-response-cache=false (a read sees a write at once; the
//     default read-only cache lags by response-cache-update-interval-ms,
//     30 s, set to 500 ms anyway); response-cache-auto-expiration-in-seconds
//     =1 (default 180 s: the read-write cache of /eureka/apps/delta is not
//     invalidated when a change leaves the delta queue, only when it
//     expires); eviction-interval-timer-in-ms=1000
//     (default 60 s); enable-self-preservation=false (else evictions stop
//     when few renewals arrive, which is every test);
//     wait-time-in-ms-when-sync-empty=0 (else a peer that copied nothing
//     from its peers at start refuses reads with 403 for that long);
//     retention-time-in-m-s-in-delta-queue (EurekaOptions.DeltaRetention,
//     default 30 s; default 3 min) and delta-retention-timer-interval-in-ms
//     =1000 (default 30 s): how long a change stays in /eureka/apps/delta.
//     peer-node-read-timeout-ms=5000 (default 200 ms, which a busy 2-core
//     machine misses, and a replication then retries).
//
// What a test sees of the real server (eureka_test.go logs it verbatim):
//   - JSON when asked with Accept: application/json (else XML):
//     {"applications":{"versions__delta":"1","apps__hashcode":"UP_1_",
//     "application":[{"name":"ORDERS","instance":[{...}]}]}}. "application"
//     and "instance" are arrays whatever their length ("application":[]
//     when empty). apps__hashcode is "" when empty, else STATUS_COUNT_
//     pairs sorted by status: "UP_2_", "OUT_OF_SERVICE_1_UP_1_". Ports are
//     {"$":8080,"@enabled":"true"}; the override is "overriddenStatus"
//     ("UNKNOWN" when none; no "overriddenstatus" key); metadata registered
//     empty reads {"@class":"java.util.Collections$EmptyMap"}; numbers in
//     leaseInfo are JSON numbers, lastUpdatedTimestamp and
//     lastDirtyTimestamp strings.
//   - /eureka/apps/delta lists each instance changed within DeltaRetention
//     once, as it is now, with the actionType of its last change (ADDED,
//     MODIFIED, DELETED), and the apps__hashcode of the whole registry
//     after the changes. /eureka/apps carries an actionType too (ADDED, or
//     MODIFIED after a status change): meaningless in a full listing.
//   - A register answers 204; a heartbeat of an instance the server does
//     not know answers 404 (a client then registers again). A status
//     override (PUT .../status) sets "status" and "overriddenStatus" and a
//     lastRenewalTimestamp durationInSecs in the future (eureka-core's Lease
//     adds the duration to every renewal).
//   - Leases: that same bug makes an instance not renewed expire after
//     about twice durationInSecs; the next eviction run (every second here)
//     then deletes it.
//   - Replication to the other peers is asynchronous (within about a
//     second here); a peer lists instances it got through replication like
//     its own, "ADDED" with their current status.

// EurekaOptions configure StartEureka.
type EurekaOptions struct {
	// DeltaRetention is how long a change stays in /eureka/apps/delta
	// (eureka.server.retention-time-in-m-s-in-delta-queue); 0 is 30 s.
	DeltaRetention time.Duration
	// Port is the server's port; 0 picks a free one.
	Port int
	// Peers are the other peers' URLs (Eureka.URL()) it replicates to and
	// from; nil is none. StartEurekaPeers sets them.
	Peers []string
}

// eurekaJSON is the Content-Type and Accept of the harness's requests.
const eurekaJSON = "application/json"

// Eureka is a running Eureka server peer started by StartEureka or
// StartEurekaPeers.
type Eureka struct {
	srv    server
	opts   EurekaOptions
	client *http.Client
}

// StartEureka starts one Eureka server peer with an empty registry and
// returns it once it logged that it started (its registry open for
// traffic) and GET /eureka/apps answers 200 with JSON. It needs
// tools/build.sh eureka's build ($MESHBRIDGE_EUREKA_DIR). The test's
// cleanup stops it.
func StartEureka(t testing.TB, opts EurekaOptions) *Eureka {
	t.Helper()
	e := newEureka(t, opts)
	e.srv.start(t, e.Address(), e.ready)
	return e
}

// StartEurekaPeers starts n Eureka server peers that replicate to each
// other (each lists the others in its defaultZone), in parallel, and
// returns them once each answers GET /eureka/apps.
func StartEurekaPeers(t testing.TB, n int) []*Eureka {
	t.Helper()
	ports := FreePorts(t, n)
	urls := make([]string, n)
	for i, p := range ports {
		urls[i] = eurekaURL(p)
	}
	peers := make([]*Eureka, n)
	for i, p := range ports {
		others := slices.Concat(urls[:i], urls[i+1:])
		peers[i] = newEureka(t, EurekaOptions{Port: p, Peers: others})
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i, e := range peers {
		wg.Go(func() { errs[i] = e.srv.tryStart(e.Address(), e.ready) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	return peers
}

func newEureka(t testing.TB, opts EurekaOptions) *Eureka {
	t.Helper()
	cp := JavaPeerClasspath(t, "eureka", "MESHBRIDGE_EUREKA_DIR")
	java := javaPath(t, "eureka")
	if opts.Port == 0 {
		opts.Port = FreePort(t)
	}
	opts.DeltaRetention = cmp.Or(opts.DeltaRetention, 30*time.Second)
	dir := t.TempDir()
	e := &Eureka{opts: opts, client: &http.Client{Timeout: 10 * time.Second}}
	props := e.properties(dir)
	args := slices.Clone(javaJVMFlags)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-D"+k+"="+props[k])
	}
	args = append(args, "-cp", cp, "io.meshbridge.eureka.EurekaServer")
	e.srv = server{
		name: "eureka:" + strconv.Itoa(opts.Port), bin: java, args: args, dir: dir,
		log: filepath.Join(dir, "eureka.log"), tailLines: 40, readyTimeout: nacosReadyTimeout,
	}
	e.srv.stopAtEnd(t)
	return e
}

// properties are the server's system properties (see the file comment).
func (e *Eureka) properties(dir string) map[string]string {
	zone := e.URL()
	if len(e.opts.Peers) > 0 {
		zone = strings.Join(e.opts.Peers, ",")
	}
	const s = "eureka.server."
	return map[string]string{
		"server.port":    strconv.Itoa(e.opts.Port),
		"server.address": "127.0.0.1",
		"user.home":      dir,

		"eureka.instance.hostname":              "127.0.0.1",
		"eureka.client.register-with-eureka":    "false",
		"eureka.client.fetch-registry":          strconv.FormatBool(len(e.opts.Peers) > 0),
		"eureka.client.service-url.defaultZone": zone,
		s + "my-url":                            e.URL(),
		// Spring's default, 0, copies nothing from the peers at start.
		s + "registry-sync-retries":       "1",
		s + "registry-sync-retry-wait-ms": "500",

		s + "use-read-only-response-cache":              "false",
		s + "response-cache-update-interval-ms":         "500",
		s + "response-cache-auto-expiration-in-seconds": "1",
		s + "eviction-interval-timer-in-ms":             "1000",
		s + "enable-self-preservation":                  "false",
		s + "wait-time-in-ms-when-sync-empty":           "0",
		s + "retention-time-in-m-s-in-delta-queue":      strconv.FormatInt(e.opts.DeltaRetention.Milliseconds(), 10),
		s + "delta-retention-timer-interval-in-ms":      "1000",
		s + "peer-node-read-timeout-ms":                 "5000",
		s + "peer-node-connect-timeout-ms":              "2000",
	}
}

func eurekaURL(port int) string { return "http://127.0.0.1:" + strconv.Itoa(port) + "/eureka/" }

// eurekaStartedLine is in the server's log once its registry copied its
// peers' (syncUp) and opened for traffic; the REST API answers before.
const eurekaStartedLine = "Started Eureka Server"

// ready tells whether the server logged eurekaStartedLine and GET
// /eureka/apps answers 200 with JSON.
func (e *Eureka) ready() error {
	if b, err := os.ReadFile(e.srv.log); err != nil || !bytes.Contains(b, []byte(eurekaStartedLine)) {
		return fmt.Errorf("no %q in %s yet", eurekaStartedLine, e.srv.log)
	}
	b, err := e.get("apps")
	if err != nil {
		return err
	}
	if !json.Valid(b) {
		return fmt.Errorf("GET /eureka/apps: not JSON: %q", b)
	}
	return nil
}

// URL is the server's service URL, "http://127.0.0.1:PORT/eureka/" (what
// a client's eureka.client.service-url.defaultZone lists).
func (e *Eureka) URL() string { return eurekaURL(e.opts.Port) }

// Address is the server's address, "127.0.0.1:PORT".
func (e *Eureka) Address() string { return "127.0.0.1:" + strconv.Itoa(e.opts.Port) }

// Port is the server's port.
func (e *Eureka) Port() int { return e.opts.Port }

// PID is the server process's (the JVM's) PID, or 0 when it is not running.
func (e *Eureka) PID() int { return e.srv.pid() }

// Dir is the server's working directory: eureka.log (its output).
func (e *Eureka) Dir() string { return e.srv.dir }

// Stop stops the server by its PID: SIGTERM, then SIGKILL after a timeout.
// It is a no-op when the server is not running.
func (e *Eureka) Stop() { e.srv.stop() }

// Kill ends the server by its PID with SIGKILL.
func (e *Eureka) Kill() { e.srv.kill() }

// Pause stops the server with SIGSTOP (by its PID): a hung server whose
// connections stay open and whose requests wait. Resume continues it.
func (e *Eureka) Pause(t testing.TB) {
	t.Helper()
	e.srv.signal(t, syscall.SIGSTOP)
}

// Resume continues a server stopped by Pause (SIGCONT).
func (e *Eureka) Resume(t testing.TB) {
	t.Helper()
	e.srv.signal(t, syscall.SIGCONT)
}

// Restart stops the server and starts it again on the same port with an
// empty registry (Eureka keeps none on disk; with peers it copies theirs).
func (e *Eureka) Restart(t testing.TB) {
	t.Helper()
	e.Stop()
	e.srv.start(t, e.Address(), e.ready)
}

// EurekaInstance is an instance the harness registers (Eureka.Register).
type EurekaInstance struct {
	// App is the application's name; Eureka upper-cases it.
	App string
	// InstanceID is the instance's id; "" is IPAddr:App:Port.
	InstanceID string
	// HostName is the instance's hostName; "" is IPAddr.
	HostName string
	IPAddr   string
	// Status is UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN; "" is UP.
	Status string
	// Port is the (non-secure) port, enabled; SecurePort, when not 0, the
	// secure port, enabled (else disabled, as 443).
	Port, SecurePort int
	// VIPAddress and SecureVIPAddress are the virtual host names; "" is
	// App lower-cased, as Spring Cloud registers.
	VIPAddress, SecureVIPAddress string
	Metadata                     map[string]string
	// RenewalIntervalInSecs and DurationInSecs are the lease's; 0 is
	// Eureka's 30 and 90.
	RenewalIntervalInSecs, DurationInSecs int
}

// ID is the instance's id as registered.
func (in EurekaInstance) ID() string {
	if in.InstanceID != "" {
		return in.InstanceID
	}
	return in.IPAddr + ":" + in.App + ":" + strconv.Itoa(in.Port)
}

// JSON is the register request's body: Eureka's JSON of the instance.
func (in EurekaInstance) JSON() []byte {
	type port struct {
		N       int    `json:"$"`
		Enabled string `json:"@enabled"`
	}
	secure := port{443, "false"}
	if in.SecurePort != 0 {
		secure = port{in.SecurePort, "true"}
	}
	vip := cmp.Or(in.VIPAddress, strings.ToLower(in.App))
	md := in.Metadata
	if md == nil {
		md = map[string]string{}
	}
	body := map[string]any{"instance": map[string]any{
		"instanceId":       in.ID(),
		"hostName":         cmp.Or(in.HostName, in.IPAddr),
		"app":              strings.ToUpper(in.App),
		"ipAddr":           in.IPAddr,
		"vipAddress":       vip,
		"secureVipAddress": cmp.Or(in.SecureVIPAddress, vip),
		"status":           cmp.Or(in.Status, "UP"),
		"port":             port{in.Port, "true"},
		"securePort":       secure,
		"dataCenterInfo": map[string]string{
			"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
			"name":   "MyOwn",
		},
		"metadata": md,
		"leaseInfo": map[string]int{
			"renewalIntervalInSecs": cmp.Or(in.RenewalIntervalInSecs, 30),
			"durationInSecs":        cmp.Or(in.DurationInSecs, 90),
		},
	}}
	b, err := json.Marshal(body)
	if err != nil {
		panic(err)
	}
	return b
}

// Register registers in (POST /eureka/apps/{APP}); the server answers 204.
// Nothing renews its lease: a test that keeps it past DurationInSecs calls
// Heartbeat.
func (e *Eureka) Register(t testing.TB, in EurekaInstance) {
	t.Helper()
	if _, err := e.do(http.MethodPost, "apps/"+url.PathEscape(strings.ToUpper(in.App)), in.JSON()); err != nil {
		t.Fatalf("eureka register %s/%s: %v", in.App, in.ID(), err)
	}
}

// Heartbeat renews an instance's lease (PUT /eureka/apps/{APP}/{ID}). It
// fails t when the server does not know the instance (404).
func (e *Eureka) Heartbeat(t testing.TB, app, id string) {
	t.Helper()
	if _, err := e.do(http.MethodPut, eurekaInstancePath(app, id), nil); err != nil {
		t.Fatalf("eureka heartbeat %s/%s: %v", app, id, err)
	}
}

// Deregister cancels an instance's lease (DELETE /eureka/apps/{APP}/{ID}).
func (e *Eureka) Deregister(t testing.TB, app, id string) {
	t.Helper()
	if _, err := e.do(http.MethodDelete, eurekaInstancePath(app, id), nil); err != nil {
		t.Fatalf("eureka deregister %s/%s: %v", app, id, err)
	}
}

// SetStatus overrides an instance's status (PUT
// /eureka/apps/{APP}/{ID}/status?value=STATUS), e.g. OUT_OF_SERVICE.
func (e *Eureka) SetStatus(t testing.TB, app, id, status string) {
	t.Helper()
	if _, err := e.do(http.MethodPut, eurekaInstancePath(app, id)+"/status?value="+url.QueryEscape(status), nil); err != nil {
		t.Fatalf("eureka set status of %s/%s to %s: %v", app, id, status, err)
	}
}

// ClearStatus removes an instance's overridden status (DELETE
// /eureka/apps/{APP}/{ID}/status): it is UP again (value=UP).
func (e *Eureka) ClearStatus(t testing.TB, app, id string) {
	t.Helper()
	if _, err := e.do(http.MethodDelete, eurekaInstancePath(app, id)+"/status?value=UP", nil); err != nil {
		t.Fatalf("eureka clear status of %s/%s: %v", app, id, err)
	}
}

func eurekaInstancePath(app, id string) string {
	return "apps/" + url.PathEscape(strings.ToUpper(app)) + "/" + url.PathEscape(id)
}

// GetJSON returns the body of GET /eureka/PATH (e.g. "apps",
// "apps/delta", "apps/ORDERS") asked as JSON, failing t unless it answers
// 200.
func (e *Eureka) GetJSON(t testing.TB, path string) []byte {
	t.Helper()
	b, err := e.get(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// EurekaApps is what the harness reads of GET /eureka/apps and
// /eureka/apps/delta.
type EurekaApps struct {
	Applications struct {
		VersionsDelta string `json:"versions__delta"`
		AppsHashcode  string `json:"apps__hashcode"`
		Application   []struct {
			Name     string                `json:"name"`
			Instance []EurekaInstanceState `json:"instance"`
		} `json:"application"`
	} `json:"applications"`
}

// EurekaInstanceState is what the harness reads of a listed instance.
type EurekaInstanceState struct {
	InstanceID       string `json:"instanceId"`
	App              string `json:"app"`
	IPAddr           string `json:"ipAddr"`
	HostName         string `json:"hostName"`
	Status           string `json:"status"`
	OverriddenStatus string `json:"overriddenStatus"`
	Port             struct {
		N       int    `json:"$"`
		Enabled string `json:"@enabled"`
	} `json:"port"`
	Metadata   map[string]any `json:"metadata"`
	ActionType string         `json:"actionType"`
}

// Apps returns GET /eureka/PATH ("apps" or "apps/delta") parsed.
func (e *Eureka) Apps(t testing.TB, path string) EurekaApps {
	t.Helper()
	b := e.GetJSON(t, path)
	var a EurekaApps
	if err := json.Unmarshal(b, &a); err != nil {
		t.Fatalf("GET /eureka/%s: %v: %s", path, err, b)
	}
	return a
}

// Instances returns the instances GET /eureka/apps lists for app, by id.
func (e *Eureka) Instances(t testing.TB, app string) map[string]EurekaInstanceState {
	t.Helper()
	a := e.Apps(t, "apps")
	out := map[string]EurekaInstanceState{}
	for _, ap := range a.Applications.Application {
		if strings.EqualFold(ap.Name, app) {
			for _, in := range ap.Instance {
				out[in.InstanceID] = in
			}
		}
	}
	return out
}

func (e *Eureka) get(path string) ([]byte, error) { return e.do(http.MethodGet, path, nil) }

// do sends a request to /eureka/PATH and returns the body of a 2xx answer.
func (e *Eureka) do(method, path string, body []byte) ([]byte, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.URL()+path, r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", eurekaJSON)
	if body != nil {
		req.Header.Set("Content-Type", eurekaJSON)
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s /eureka/%s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}
