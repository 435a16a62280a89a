package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"
)

// eurekaRegistry is the Eureka server Spring Cloud users run (Spring Cloud
// Netflix's Eureka server 4.3.0, tools/build.sh eureka) on 127.0.0.1 alone,
// with its read-only response cache off: a registration is read at once
// (README "Eureka": with the default cache a change is read up to 30 s
// later). Each echo instance registers as an application's Eureka client
// does, over the REST API: POST /eureka/apps/ECHO with its instance JSON
// (metadata protocol: grpc makes the port gRPC), a heartbeat every
// renewal interval, PUT .../status?value=OUT_OF_SERVICE to take it out of
// service and DELETE to deregister it.
type eurekaRegistry struct {
	classpath string // the server's JVM classpath
	port      int
	hc        *http.Client
	onStop    func(func())
	apps      map[string]*eurekaApp
}

// eurekaApp is one registered instance and its heartbeat.
type eurekaApp struct {
	stop func() // stops the heartbeat and waits for it
}

// The demo's leases: a heartbeat every eurekaRenewal, a lease of
// eurekaLease (Eureka's defaults are 30 s and 90 s).
const (
	eurekaRenewal = 5 * time.Second
	eurekaLease   = 15 * time.Second
)

func (e *eurekaRegistry) name() string { return "Eureka" }

func (e *eurekaRegistry) registered() string {
	return fmt.Sprintf("in Eureka over its REST API (POST /eureka/apps/ECHO, metadata protocol: grpc; a heartbeat every %s)", eurekaRenewal)
}

// host is the eureka registry's default host, <application lower-cased>.eureka.
func (e *eurekaRegistry) host() string { return "echo.eureka" }

// url is the server's service URL, as a client's defaultZone lists it.
func (e *eurekaRegistry) url() string { return fmt.Sprintf("http://127.0.0.1:%d/eureka/", e.port) }

func (e *eurekaRegistry) config() string {
	return fmt.Sprintf(`- name: eureka-demo
  type: eureka
  eureka:
    servers: [%s]
    interval: 1s   # GET apps/delta every second (default 5s): one request, whatever the number of applications
`, e.url())
}

func (e *eurekaRegistry) start(d *demo) error {
	port, err := freePort()
	if err != nil {
		return err
	}
	e.port, e.onStop = port, d.onStop
	e.hc = &http.Client{Timeout: 5 * time.Second}
	e.apps = map[string]*eurekaApp{}
	home := filepath.Join(d.dir, "eureka")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return err
	}
	const s = "eureka.server."
	props := []string{
		"server.port=" + strconv.Itoa(port),
		"server.address=127.0.0.1",
		"user.home=" + home,
		// A standalone server: it neither registers with nor reads from a
		// peer; its own URL is its only zone.
		"eureka.instance.hostname=127.0.0.1",
		"eureka.client.register-with-eureka=false",
		"eureka.client.fetch-registry=false",
		"eureka.client.service-url.defaultZone=" + e.url(),
		s + "my-url=" + e.url(),
		// Reads see writes at once (README "Eureka").
		s + "use-read-only-response-cache=false",
		// A server that copied no registry from peers at start otherwise
		// refuses reads for 5 minutes.
		s + "wait-time-in-ms-when-sync-empty=0",
	}
	args := []string{"-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-XX:-UsePerfData", "-Djava.net.preferIPv4Stack=true"}
	for _, p := range props {
		args = append(args, "-D"+p)
	}
	args = append(args, "-cp", e.classpath, "io.meshbridge.eureka.EurekaServer")
	say("Starting the Eureka server (Spring Cloud Netflix 4.3.0) on %s, its read-only response cache off", e.url())
	if err := d.start("eureka", exec.Command("java", args...), func() bool { return !dials(port) }); err != nil {
		return err
	}
	log := filepath.Join(d.dir, "eureka.log")
	deadline := time.Now().Add(3 * time.Minute)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(log); err == nil && bytes.Contains(b, []byte("Started Eureka Server")) {
			if _, err := e.do(http.MethodGet, "apps", nil); err == nil {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("eureka did not serve its API within 3m (log: %s)", log)
}

// instanceJSON is the register request's body: Eureka's JSON of instance
// id of application ECHO at 127.0.0.1:port, as a Spring application's
// client sends it, with protocol grpc.
func instanceJSON(id string, port int) ([]byte, error) {
	type eurekaPort struct {
		N       int    `json:"$"`
		Enabled string `json:"@enabled"`
	}
	return json.Marshal(map[string]any{"instance": map[string]any{
		"instanceId":       id,
		"app":              "ECHO",
		"hostName":         "127.0.0.1",
		"ipAddr":           "127.0.0.1",
		"vipAddress":       "echo",
		"secureVipAddress": "echo",
		"status":           "UP",
		"port":             eurekaPort{port, "true"},
		"securePort":       eurekaPort{443, "false"},
		"dataCenterInfo": map[string]string{
			"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo",
			"name":   "MyOwn",
		},
		"metadata": map[string]string{"protocol": "grpc", "zone": "zone-a", "version": "v1"},
		"leaseInfo": map[string]int{
			"renewalIntervalInSecs": int(eurekaRenewal / time.Second),
			"durationInSecs":        int(eurekaLease / time.Second),
		},
	}})
}

func (e *eurekaRegistry) register(id string, port int) error {
	body, err := instanceJSON(id, port)
	if err != nil {
		return err
	}
	if _, err := e.do(http.MethodPost, "apps/ECHO", body); err != nil {
		return fmt.Errorf("register %s in eureka: %w", id, err)
	}
	e.apps[id] = &eurekaApp{stop: e.heartbeat(id, body)}
	e.onStop(e.apps[id].stop)
	return nil
}

// heartbeat renews instance id's lease every eurekaRenewal until the
// returned stop (idempotent) is called; when the server does not know
// the instance (404: it restarted, or evicted it) it registers it again,
// as Eureka's client does.
func (e *eurekaRegistry) heartbeat(id string, body []byte) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		tick := time.NewTicker(eurekaRenewal)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			status, err := e.do(http.MethodPut, "apps/ECHO/"+url.PathEscape(id), nil)
			if status == http.StatusNotFound {
				_, err = e.do(http.MethodPost, "apps/ECHO", body)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "demo: heartbeat of %s: %v\n", id, err)
			}
		}
	})
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

func (e *eurekaRegistry) outOfServiceHow() string {
	return "PUT /eureka/apps/ECHO/backend-1/status?value=OUT_OF_SERVICE (its heartbeats go on)"
}

// outOfService overrides instance id's status on the server, as an
// operator (or Spring's /actuator/service-registry) does to drain it.
func (e *eurekaRegistry) outOfService(id string) error {
	if _, err := e.do(http.MethodPut, "apps/ECHO/"+url.PathEscape(id)+"/status?value=OUT_OF_SERVICE", nil); err != nil {
		return fmt.Errorf("set %s OUT_OF_SERVICE: %w", id, err)
	}
	return nil
}

// deregister does what an application's client does when it stops: stop
// its heartbeats and cancel its lease (DELETE).
func (e *eurekaRegistry) deregister(id string) error {
	app := e.apps[id]
	if app == nil {
		return fmt.Errorf("deregister %s: not registered", id)
	}
	app.stop()
	delete(e.apps, id)
	if _, err := e.do(http.MethodDelete, "apps/ECHO/"+url.PathEscape(id), nil); err != nil {
		return fmt.Errorf("deregister %s from eureka: %w", id, err)
	}
	return nil
}

// do sends a request to /eureka/PATH as JSON and returns its status; an
// answer other than 2xx is an error.
func (e *eurekaRegistry) do(method, path string, body []byte) (int, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, e.url()+path, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := e.hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("%s /eureka/%s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	return resp.StatusCode, nil
}
