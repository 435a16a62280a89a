// Package eurekatest is a recorded Eureka server for tests: it answers GET
// apps/ and GET apps/delta in the server's JSON from a registry the test
// scripts, and does on demand what the real server does only by chance or
// after minutes: a change left out of the delta (one the bridge missed),
// an emptied delta queue (the retention window passed), a failure, a hang.
// The real server is tested as it is (tools/eureka, test/harness); this one
// scripts the faults, for package eureka's tests, its benchmarks and the
// pipeline's differential (package pipelinetest). Like net/http/httptest it
// is a normal package that only tests import.
package eurekatest

import (
	"encoding/json"
	"encoding/pem"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Instance is one registration, as a Eureka client sends it.
type Instance struct {
	App, ID, HostName, IPAddr string
	// Status is UP, DOWN, STARTING, OUT_OF_SERVICE or UNKNOWN.
	Status                 string
	Port, SecurePort       uint32
	PortOff, SecureEnabled bool
	Metadata               map[string]string
}

// Server is a recorded Eureka server. Its methods are safe for concurrent
// use.
type Server struct {
	srv *httptest.Server

	mu   sync.Mutex
	apps map[string]map[string]Instance // application → ID → instance
	// delta is the recently changed queue: each instance once, at its
	// last change, listed in its current state (as the real server's
	// queue holds the instance itself); a deleted one as it was.
	delta []entry
	// status, when not 0, answers every request; hang, when set, is waited
	// on first; auth, when set, is the Authorization header required.
	status int
	hang   chan struct{}
	auth   string
	// requests counts requests per path; counts are the instances per
	// status (the hashcode's); full caches the answer to GET apps/ until a
	// change, as the real server's response cache does.
	requests map[string]int
	counts   map[string]int
	full     []byte
}

type entry struct {
	in     Instance
	action string // ADDED, MODIFIED, DELETED
}

// Start starts a server on 127.0.0.1; the test's cleanup stops it.
func Start(t testing.TB) *Server { return start(t, false) }

// StartTLS starts a server on 127.0.0.1 serving https with a certificate
// of its own (CertPEM); the test's cleanup stops it.
func StartTLS(t testing.TB) *Server { return start(t, true) }

func start(t testing.TB, tls bool) *Server {
	s := &Server{apps: map[string]map[string]Instance{}, requests: map[string]int{}, counts: map[string]int{}}
	if tls {
		s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	} else {
		s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	}
	t.Cleanup(func() {
		s.Resume()
		s.srv.Close()
	})
	return s
}

// CertPEM is the PEM of a StartTLS server's certificate, its own CA.
func (s *Server) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.srv.Certificate().Raw})
}

// URL is the server's base URL, as defaultZone names it.
func (s *Server) URL() string { return s.srv.URL + "/eureka/" }

// TruthURL is a base URL of the server that answers whatever it is told
// to do (Pause, SetStatus, SetAuth) and counts nothing: what a fresh
// client would read of the registry (pipelinetest's oracle).
func (s *Server) TruthURL() string { return s.srv.URL + truthPrefix + "/eureka/" }

const truthPrefix = "/truth"

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	path, truth := strings.CutPrefix(r.URL.Path, truthPrefix)
	s.mu.Lock()
	hang, status, auth := s.hang, s.status, s.auth
	if truth {
		hang, status, auth = nil, 0, ""
	} else {
		s.requests[path]++
	}
	s.mu.Unlock()
	if hang != nil {
		select {
		case <-hang:
		case <-r.Context().Done():
			return
		}
	}
	if auth != "" && r.Header.Get("Authorization") != auth {
		http.Error(w, "unauthorized", http.StatusUnauthorized)
		return
	}
	if status != 0 {
		http.Error(w, "scripted failure", status)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var body []byte
	switch path {
	case "/eureka/apps/":
		if s.full == nil {
			var all []entry
			for _, app := range slices.Sorted(maps.Keys(s.apps)) {
				for _, id := range slices.Sorted(maps.Keys(s.apps[app])) {
					all = append(all, entry{in: s.apps[app][id]})
				}
			}
			s.full = s.encode(all)
		}
		body = s.full
	case "/eureka/apps/delta":
		entries := make([]entry, len(s.delta))
		for i, e := range s.delta {
			if cur, ok := s.apps[e.in.App][e.in.ID]; ok && e.action != "DELETED" {
				e.in = cur
			}
			entries[i] = e
		}
		body = s.encode(entries)
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

// encode writes entries as the server's JSON, with the hashcode of the
// whole registry. s.mu is held.
func (s *Server) encode(entries []entry) []byte {
	var apps []any
	index := map[string]int{}
	for _, e := range entries {
		in := e.in
		meta := map[string]string{"@class": "java.util.Collections$EmptyMap"}
		if len(in.Metadata) > 0 {
			meta = in.Metadata
		}
		j := map[string]any{
			"instanceId": in.ID, "app": in.App, "hostName": in.HostName, "ipAddr": in.IPAddr,
			"status": in.Status, "overriddenStatus": "UNKNOWN",
			"port":       map[string]any{"$": in.Port, "@enabled": strconv.FormatBool(!in.PortOff)},
			"securePort": map[string]any{"$": in.SecurePort, "@enabled": strconv.FormatBool(in.SecureEnabled)},
			"dataCenterInfo": map[string]string{
				"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
			"metadata": meta,
		}
		if e.action != "" {
			j["actionType"] = e.action
		}
		i, ok := index[in.App]
		if !ok {
			i = len(apps)
			index[in.App] = i
			apps = append(apps, map[string]any{"name": in.App, "instance": []any{}})
		}
		app := apps[i].(map[string]any)
		app["instance"] = append(app["instance"].([]any), j)
	}
	if apps == nil {
		apps = []any{}
	}
	b, _ := json.Marshal(map[string]any{"applications": map[string]any{
		"versions__delta": "1", "apps__hashcode": Hashcode(s.counts), "application": apps}})
	return b
}

// Hashcode is the Eureka server's reconcile hashcode of a registry of
// counts instances per status (Applications.getReconcileHashCode): each
// status in name order, "_", its count, "_".
func Hashcode(counts map[string]int) string {
	var b strings.Builder
	for _, st := range slices.Sorted(maps.Keys(counts)) {
		if n := counts[st]; n > 0 {
			b.WriteString(st + "_" + strconv.Itoa(n) + "_")
		}
	}
	return b.String()
}

// Put registers or changes an instance (App upper-cased, as the server
// does); inDelta says whether the change enters the delta queue; false: the
// bridge missed it, and the instance's earlier changes left the queue too
// (the queue lists an instance in its current state, so a change to one
// still listed cannot be missed otherwise).
func (s *Server) Put(in Instance, inDelta bool) {
	in.App = strings.ToUpper(in.App)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apps[in.App] == nil {
		s.apps[in.App] = map[string]Instance{}
	}
	action := "ADDED"
	if old, ok := s.apps[in.App][in.ID]; ok {
		action = "MODIFIED"
		s.counts[old.Status]--
	}
	s.apps[in.App][in.ID] = in
	s.counts[in.Status]++
	s.full = nil
	s.requeue(in, action, inDelta)
}

// requeue takes in's entry out of the delta queue, and puts it back last
// when inDelta. s.mu is held.
func (s *Server) requeue(in Instance, action string, inDelta bool) {
	s.delta = slices.DeleteFunc(s.delta, func(e entry) bool { return e.in.App == in.App && e.in.ID == in.ID })
	if inDelta {
		s.delta = append(s.delta, entry{in: in, action: action})
	}
}

// Delete deregisters an instance; inDelta as for Put.
func (s *Server) Delete(app, id string, inDelta bool) {
	app = strings.ToUpper(app)
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.apps[app][id]
	if !ok {
		return
	}
	delete(s.apps[app], id)
	if len(s.apps[app]) == 0 {
		delete(s.apps, app)
	}
	s.counts[in.Status]--
	s.full = nil
	s.requeue(in, "DELETED", inDelta)
}

// Instances returns every registered instance, by application then ID.
func (s *Server) Instances() []Instance {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Instance
	for _, app := range slices.Sorted(maps.Keys(s.apps)) {
		for _, id := range slices.Sorted(maps.Keys(s.apps[app])) {
			out = append(out, s.apps[app][id])
		}
	}
	return out
}

// Expire empties the delta queue (the retention window passed).
func (s *Server) Expire() {
	s.mu.Lock()
	s.delta = nil
	s.mu.Unlock()
}

// SetStatus makes every answer the HTTP status code (0: answer normally).
func (s *Server) SetStatus(code int) {
	s.mu.Lock()
	s.status = code
	s.mu.Unlock()
}

// SetAuth requires the Authorization header value (an HTTP basic
// credential); "" requires none.
func (s *Server) SetAuth(header string) {
	s.mu.Lock()
	s.auth = header
	s.mu.Unlock()
}

// Pause makes every request wait until Resume (a hung server: the
// connection is accepted, the request never answered).
func (s *Server) Pause() {
	s.mu.Lock()
	if s.hang == nil {
		s.hang = make(chan struct{})
	}
	s.mu.Unlock()
}

// Resume lets the paused requests and the next ones through.
func (s *Server) Resume() {
	s.mu.Lock()
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	s.mu.Unlock()
}

// Requests counts the requests to path so far ("/eureka/apps/",
// "/eureka/apps/delta").
func (s *Server) Requests(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}
