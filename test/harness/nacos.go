package harness

import (
	"bufio"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// This file runs the Nacos server meshbridge's users run: Nacos 3.1.0, as
// republished on Maven Central (tools/nacos, built by tools/build.sh nacos),
// standalone with its embedded store, in a fresh nacos.home under
// t.TempDir(), with auth off or on (WithNacosAuth). The server's HTTP API
// (P), gRPC API (P+1000) and cluster gRPC (P+1001) listen on 127.0.0.1; its
// JRaft port (P-1000) binds every interface, so StartNacos runs only in the
// test binary's own network namespace (netns.go; RequireNetNS).
//
// What a test sees of the real server (3.1.0):
//   - The v1 client API (/nacos/v1/ns/...) answers; v2's instance API is 410
//     Gone; the v3 admin API needs a token (the harness's requests carry the
//     server-identity header instead, NacosIdentityKey).
//   - An ephemeral instance registered over HTTP lives on heartbeats: one
//     not beaten for 15 s turns unhealthy, for 30 s is deleted. The harness
//     beats each ephemeral instance it registered healthy every 5 s, as a
//     Nacos 1.x client does, until it deregisters it; a beat re-registers an
//     instance the server lost (after Restart). A beat makes an unhealthy
//     instance healthy, so one registered unhealthy is not beaten: it is
//     deleted after 30 s.
//   - A persistent instance (ephemeral=false) is health-checked by the
//     server itself (TCP connect to ip:port every few seconds): its health
//     is what the check finds, whatever it was registered with. A service
//     holds ephemeral or persistent instances, not both (a register of the
//     other kind is refused with 400).
//   - Pushes reach subscribers of every group within about half a second.
//   - A service whose last instance goes stays listed, empty, until the
//     server's empty-service cleaner deletes it: 3.1.0's runs 30 s after
//     start, then every 60 s, and deletes a service empty and unchanged for
//     60 s (nacos.naming.clean.empty-service.interval and .expired-time;
//     tools/nacos's nacos.naming.empty-service.clean.* keys are Nacos 1.x's
//     cleaner's, which 3.1.0 does not read): 60 to 120 s after it emptied.
//   - With auth on, a user can log in a few seconds after it is created; a
//     wrong password on the v1 login (what nacos-sdk-go calls) is answered
//     with 500 ("Handle API Compatibility failed"), not 403.

// NacosOption changes how StartNacos starts the server.
type NacosOption func(*nacosOptions)

type nacosOptions struct {
	auth bool
	tls  *KeyPair
	ca   *CA
}

// WithNacosAuth turns on Nacos's auth: every API needs a token, got by
// logging in as NacosAdmin with Nacos.AdminPassword.
func WithNacosAuth() NacosOption { return func(o *nacosOptions) { o.auth = true } }

// WithNacosTLS serves the HTTP API (and so the login) and the gRPC API over
// TLS only, with the server certificate cert that ca issued (for
// 127.0.0.1): NacosServer.TLS. The harness's own requests trust ca.
func WithNacosTLS(cert *KeyPair, ca *CA) NacosOption {
	return func(o *nacosOptions) { o.tls, o.ca = cert, ca }
}

// Nacos is a running Nacos server started by StartNacos.
type Nacos struct {
	srv    server // its dir is nacos.home: data/, logs/, nacos.log
	cfg    NacosServer
	client *http.Client

	mu    sync.Mutex
	beats map[string]url.Values // ephemeral instances to beat, by nacosInstanceKey
	stop  chan struct{}         // closed when the test ends
	// beatMu is held by a round of beats while it sends them, and by
	// stopBeats: a beat still in flight when an instance's beats stop
	// would reach the server after the deregistration (or unhealthy
	// registration) that follows, and a beat re-registers an instance the
	// server does not know, healthy.
	beatMu sync.Mutex
}

// StartNacos starts a Nacos server with an empty store and returns it once
// its HTTP API lists services, its gRPC port accepts connections and, with
// auth, the admin user can log in. It needs the test binary's own network
// namespace (RequireNetNS) and the server built by tools/build.sh nacos
// (JavaPeerClasspath, $MESHBRIDGE_NACOS_DIR). The test's cleanup stops it.
func StartNacos(t testing.TB, opts ...NacosOption) *Nacos {
	t.Helper()
	var o nacosOptions
	for _, opt := range opts {
		opt(&o)
	}
	RequireNetNS(t, "nacos")
	cp := JavaPeerClasspath(t, "nacos", "MESHBRIDGE_NACOS_DIR")
	java := javaPath(t, "nacos")
	port, err := FindNacosPort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cfg, err := NewNacosServer(dir, port, o.auth)
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	if o.tls != nil {
		cfg.TLS = &NacosTLS{CertFile: o.tls.CertFile, KeyFile: o.tls.KeyFile}
		client.Transport = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: o.ca.Pool()}}
	}
	n := &Nacos{
		srv: server{
			name: "nacos",
			bin:  java,
			args: cfg.JavaArgs(cp),
			dir:  dir,
			log:  filepath.Join(dir, "nacos.log"),
			logs: []string{
				filepath.Join(dir, "logs", "naming-server.log"),
				filepath.Join(dir, "logs", "remote.log"),
			},
			tailLines: 40,
			// A JVM of 170 jars with its Spring contexts: 10-15 s on an
			// idle machine, over a minute on a busy one.
			readyTimeout: nacosReadyTimeout,
		},
		cfg:    cfg,
		client: client,
		beats:  map[string]url.Values{},
		stop:   make(chan struct{}),
	}
	n.srv.stopAtEnd(t)
	t.Cleanup(func() { close(n.stop) })
	n.srv.start(t, n.Address(), n.ready)
	if o.auth {
		n.createAdmin(t)
	}
	go n.beatLoop()
	return n
}

func javaPath(t testing.TB, peer string) string {
	t.Helper()
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if p := filepath.Join(d, "java"); isExecutable(p) {
			return p
		}
	}
	missing(t, peer, "no java on PATH for "+peer)
	return ""
}

// ready tells whether the server printed its ready line, its HTTP API
// lists services and its gRPC port accepts a connection.
func (n *Nacos) ready() error {
	if !logHasLine(n.srv.log, NacosReadyLine) {
		return fmt.Errorf("no %q line in %s yet", NacosReadyLine, n.srv.log)
	}
	if _, err := n.listServices(defaultNacosNamespace, defaultNacosGroup); err != nil {
		return err
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(n.GRPCPort()), time.Second)
	if err != nil {
		return fmt.Errorf("nacos gRPC port: %v", err)
	}
	c.Close()
	return nil
}

// logHasLine tells whether file has a line equal to line.
func logHasLine(file, line string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for sc.Scan() {
		if sc.Text() == line {
			return true
		}
	}
	return false
}

// createAdmin creates the admin user (POST /nacos/v3/auth/user/admin, which
// Nacos serves once, to the first caller) and waits until it can log in.
func (n *Nacos) createAdmin(t testing.TB) {
	t.Helper()
	if _, err := n.do(http.MethodPost, "/nacos/v3/auth/user/admin", url.Values{"password": {n.cfg.AdminPassword}}); err != nil {
		t.Fatalf("create the nacos admin user: %v", err)
	}
	Eventually(t, nacosReadyTimeout, "nacos admin login", func() error {
		_, err := n.Login(NacosAdmin, n.cfg.AdminPassword)
		return err
	})
}

// Login logs in over the v1 API (POST /nacos/v1/auth/users/login, what
// nacos-sdk-go calls) and returns the access token.
func (n *Nacos) Login(user, password string) (string, error) {
	resp, err := n.client.PostForm(n.url("/nacos/v1/auth/users/login"), url.Values{"username": {user}, "password": {password}})
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("login as %s: %s: %s", user, resp.Status, strings.TrimSpace(string(b)))
	}
	var tok struct {
		AccessToken string `json:"accessToken"`
	}
	if err := json.Unmarshal(b, &tok); err != nil || tok.AccessToken == "" {
		return "", fmt.Errorf("login as %s: no token in %q", user, b)
	}
	return tok.AccessToken, nil
}

// Address is the HTTP API's address, "127.0.0.1:port" (what a Nacos client
// is configured with; it derives the gRPC port from it).
func (n *Nacos) Address() string { return n.cfg.Address() }

// HTTPPort is the HTTP API's port.
func (n *Nacos) HTTPPort() int { return n.cfg.Port }

// GRPCPort is the gRPC API's port: the HTTP port + 1000.
func (n *Nacos) GRPCPort() int { return n.cfg.GRPCPort() }

// AdminPassword is the admin's (NacosAdmin's) password with
// WithNacosAuth, else "".
func (n *Nacos) AdminPassword() string { return n.cfg.AdminPassword }

// Dir is the server's nacos.home: data/, logs/ and nacos.log.
func (n *Nacos) Dir() string { return n.srv.dir }

// Pid is the server process's (the JVM's) PID, or 0 when it is not running.
func (n *Nacos) Pid() int { return n.srv.pid() }

// Pause stops the server with SIGSTOP (by its PID): a hung server, whose
// connections stay open and whose requests wait. Resume continues it.
func (n *Nacos) Pause(t testing.TB) {
	t.Helper()
	n.srv.signal(t, syscall.SIGSTOP)
}

// Resume continues a server stopped by Pause.
func (n *Nacos) Resume(t testing.TB) {
	t.Helper()
	n.srv.signal(t, syscall.SIGCONT)
}

// Stop stops the server by its PID: SIGTERM, then SIGKILL after a timeout.
// It is a no-op when the server is not running.
func (n *Nacos) Stop() { n.srv.stop() }

// Restart stops the server and starts it again on the same ports and
// nacos.home, returning once it is ready. Persistent instances and users
// survive (the embedded store); ephemeral ones do not: their clients
// register them again (the harness's beats do, within 5 s; nacos-sdk-go on
// reconnecting).
func (n *Nacos) Restart(t testing.TB) {
	t.Helper()
	n.Stop()
	_ = os.Remove(n.srv.log) // its ready line is the old run's
	n.srv.start(t, n.Address(), n.ready)
}

const (
	defaultNacosNamespace = "public"
	defaultNacosGroup     = "DEFAULT_GROUP"
	// nacosReadyTimeout bounds the server's start.
	nacosReadyTimeout = 3 * time.Minute
	// nacosBeatInterval is how often a Nacos 1.x client beats an instance.
	nacosBeatInterval = 5 * time.Second
)

func (n *Nacos) url(path string) string { return n.cfg.Scheme() + "://" + n.Address() + path }

// do sends a request with form parameters (in the query for GET, PUT and
// DELETE; in the body for POST) and the server-identity header, and returns
// the body, or an error for a transport error or a status other than 200.
func (n *Nacos) do(method, path string, form url.Values) ([]byte, error) {
	u := n.url(path)
	var body io.Reader
	if method == http.MethodPost {
		body = strings.NewReader(form.Encode())
	} else {
		u += "?" + form.Encode()
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	req.Header.Set(NacosIdentityKey, n.cfg.IdentityValue)
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return b, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(b)))
	}
	return b, nil
}

func nacosInstanceKey(namespace, group, service, ip string, port int) string {
	return strings.Join([]string{namespace, group, service, ip, strconv.Itoa(port)}, "\x00")
}

// nacosForm is the v1 API's form naming an instance.
func nacosForm(namespace, group, service, ip string, port int) url.Values {
	form := url.Values{
		"serviceName": {nacosServiceName(group, service)},
		"ip":          {ip},
		"port":        {strconv.Itoa(port)},
	}
	if namespace != "" {
		form.Set("namespaceId", namespace)
	}
	if group != "" {
		form.Set("groupName", group)
	}
	return form
}

// RegisterInstance registers instance ip:port of service in group and
// namespace over the v1 API (POST /nacos/v1/ns/instance), or overwrites it:
// registering it again with other values is how a test changes its weight,
// metadata, health or enabled flag. namespace "" or "public" is the default
// namespace; group "" is DEFAULT_GROUP; weight is 0 to 10000; metadata may be
// nil; enabled=false hides the instance from clients' lists. An ephemeral
// instance registered healthy is beaten until DeregisterInstance (see the
// file comment); one registered unhealthy is deleted by the server after
// 30 s. A persistent instance's health is the server's TCP check of
// ip:port. Subscribers see the change within about half a second.
func (n *Nacos) RegisterInstance(t testing.TB, namespace, group, service, ip string, port int, weight float64,
	metadata map[string]string, ephemeral, healthy, enabled bool) {
	t.Helper()
	n.register(t, namespace, group, service, "", ip, port, weight, metadata, ephemeral, healthy, enabled)
}

// RegisterInCluster registers an ephemeral, healthy, enabled instance in
// cluster ("" is DEFAULT) as RegisterInstance does: an application's
// instance, beaten until DeregisterInstance.
func (n *Nacos) RegisterInCluster(t testing.TB, namespace, group, service, cluster, ip string, port int, weight float64,
	metadata map[string]string) {
	t.Helper()
	n.register(t, namespace, group, service, cluster, ip, port, weight, metadata, true, true, true)
}

func (n *Nacos) register(t testing.TB, namespace, group, service, cluster, ip string, port int, weight float64,
	metadata map[string]string, ephemeral, healthy, enabled bool) {
	t.Helper()
	if metadata == nil {
		metadata = map[string]string{}
	}
	if cluster == "" {
		cluster = "DEFAULT"
	}
	meta, err := json.Marshal(metadata)
	if err != nil {
		t.Fatalf("encode metadata: %v", err)
	}
	form := nacosForm(namespace, group, service, ip, port)
	form.Set("clusterName", cluster)
	form.Set("weight", strconv.FormatFloat(weight, 'f', -1, 64))
	form.Set("metadata", string(meta))
	form.Set("ephemeral", strconv.FormatBool(ephemeral))
	form.Set("healthy", strconv.FormatBool(healthy))
	form.Set("enabled", strconv.FormatBool(enabled))
	key := nacosInstanceKey(namespace, group, service, ip, port)
	beaten := ephemeral && healthy
	if !beaten {
		n.stopBeats(key)
	}
	if _, err := n.do(http.MethodPost, "/nacos/v1/ns/instance", form); err != nil {
		t.Fatalf("register %s:%d in %s/%s/%s: %v", ip, port, namespace, group, service, err)
	}
	if beaten {
		beat, _ := json.Marshal(map[string]any{
			"serviceName": nacosServiceName(group, service), "ip": ip, "port": port, "cluster": cluster,
			"weight": weight, "metadata": metadata,
		})
		n.mu.Lock()
		n.beats[key] = url.Values{"serviceName": form["serviceName"], "namespaceId": form["namespaceId"],
			"groupName": form["groupName"], "clusterName": {cluster}, "beat": {string(beat)}}
		n.mu.Unlock()
	}
}

// stopBeats stops the beats of instance key (nacosInstanceKey) and returns
// once none of its beats is in flight, so that a request sent after it
// reaches the server after the instance's last beat.
func (n *Nacos) stopBeats(key string) {
	n.beatMu.Lock()
	defer n.beatMu.Unlock()
	n.mu.Lock()
	delete(n.beats, key)
	n.mu.Unlock()
}

// SetProtectThreshold sets the protect threshold of service in group and
// namespace (as for RegisterInstance) to threshold, 0 to 1, over the admin
// API (PUT /nacos/v3/admin/ns/service; 3.x answers the v1 one 410 Gone),
// which also clears the service's metadata. The service must exist
// (register an instance first). While the share of its healthy instances
// is at or below the threshold, the server sends subscribers every enabled
// instance marked healthy, with reachProtectionThreshold set (Nacos's
// ServiceUtil.selectInstancesWithHealthyProtection).
func (n *Nacos) SetProtectThreshold(t testing.TB, namespace, group, service string, threshold float64) {
	t.Helper()
	if namespace == "" {
		namespace = "public"
	}
	if group == "" {
		group = defaultNacosGroup
	}
	form := url.Values{
		"namespaceId":      {namespace},
		"groupName":        {group},
		"serviceName":      {service},
		"protectThreshold": {strconv.FormatFloat(threshold, 'f', -1, 64)},
	}
	if _, err := n.do(http.MethodPut, "/nacos/v3/admin/ns/service", form); err != nil {
		t.Fatalf("set the protect threshold of %s/%s/%s: %v", namespace, group, service, err)
	}
}

// DeregisterInstance stops the beats of instance ip:port of service in
// group and namespace, waiting for one in flight, then removes it over the
// v1 API (DELETE /nacos/v1/ns/instance): no beat of it reaches the server
// after the removal, where it would register the instance again.
// namespace and group as for RegisterInstance. ephemeral must be what it
// was registered as. Removing an unknown instance succeeds.
func (n *Nacos) DeregisterInstance(t testing.TB, namespace, group, service, ip string, port int, ephemeral bool) {
	t.Helper()
	n.stopBeats(nacosInstanceKey(namespace, group, service, ip, port))
	form := nacosForm(namespace, group, service, ip, port)
	form.Set("ephemeral", strconv.FormatBool(ephemeral))
	if _, err := n.do(http.MethodDelete, "/nacos/v1/ns/instance", form); err != nil {
		t.Fatalf("deregister %s:%d in %s/%s/%s: %v", ip, port, namespace, group, service, err)
	}
}

// beatLoop beats every instance in n.beats every nacosBeatInterval (PUT
// /nacos/v1/ns/instance/beat) until the test ends. A failed beat is
// retried at the next round: the server forgives three missed beats.
func (n *Nacos) beatLoop() {
	tick := time.NewTicker(nacosBeatInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.stop:
			return
		case <-tick.C:
		}
		n.beatMu.Lock()
		n.mu.Lock()
		var forms []url.Values
		for _, f := range n.beats {
			forms = append(forms, f)
		}
		n.mu.Unlock()
		for _, f := range forms {
			_, _ = n.do(http.MethodPut, "/nacos/v1/ns/instance/beat", f)
		}
		n.beatMu.Unlock()
	}
}

// ListServices returns the names of the services in group and namespace
// (GET /nacos/v1/ns/service/list, one page of up to 10,000), without the
// group prefix; namespace "" or "public" is the default namespace, group ""
// is DEFAULT_GROUP.
func (n *Nacos) ListServices(t testing.TB, namespace, group string) []string {
	t.Helper()
	names, err := n.listServices(namespace, group)
	if err != nil {
		t.Fatalf("list services in %s/%s: %v", namespace, group, err)
	}
	return names
}

func (n *Nacos) listServices(namespace, group string) ([]string, error) {
	return nacosV1{n.do}.listServices(namespace, group)
}

// ListInstances returns the enabled instances of service in group and
// namespace, healthy or not (GET /nacos/v1/ns/instance/list), as a Nacos
// 1.x client reads them: disabled instances are left out.
func (n *Nacos) ListInstances(t testing.TB, namespace, group, service string) []NacosInstance {
	t.Helper()
	in, err := nacosV1{n.do}.listInstances(namespace, group, service)
	if err != nil {
		t.Fatal(err)
	}
	return in
}
