package eureka

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// scriptedEureka is a recorded Eureka server: it answers GET apps/ and GET
// apps/delta in the server's JSON from a registry the test scripts, and
// can do what the real server does not on demand: drop a change from the
// delta (a delta the bridge missed, at once rather than after the
// retention window), answer a wrong hashcode, fail or hang. The real
// server's own behaviour is tested against it (registry_test.go).
type scriptedEureka struct {
	srv *httptest.Server

	mu    sync.Mutex
	apps  map[string]map[string]instance // application → ID → instance
	delta []instance                     // the recently changed queue, with action types
	// status, when not 0, is the answer to every request; hang, when set,
	// is waited on before answering; auth, when set, is the Authorization
	// header required.
	status int
	hang   chan struct{}
	auth   string
	// requests counts requests per path.
	requests map[string]int
	// counts are the instances per status; full caches the answer to GET
	// apps/ until a change (the real server caches it too).
	counts map[string]int
	full   []byte
}

func startScripted(t testing.TB) *scriptedEureka {
	s := &scriptedEureka{apps: map[string]map[string]instance{}, requests: map[string]int{}, counts: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(func() {
		s.mu.Lock()
		if s.hang != nil {
			close(s.hang)
			s.hang = nil
		}
		s.mu.Unlock()
		s.srv.Close()
	})
	return s
}

// URL is the server's base URL, as defaultZone names it.
func (s *scriptedEureka) URL() string { return s.srv.URL + "/eureka/" }

func (s *scriptedEureka) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	s.requests[r.URL.Path]++
	hang, status, auth := s.hang, s.status, s.auth
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
	switch r.URL.Path {
	case "/eureka/apps/":
		if s.full == nil {
			s.full = s.encode(s.all())
		}
		body = s.full
	case "/eureka/apps/delta":
		body = s.encode(s.delta)
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(body)
}

func (s *scriptedEureka) all() []instance {
	var out []instance
	for _, insts := range s.apps {
		for _, in := range insts {
			out = append(out, in)
		}
	}
	return out
}

// encode writes insts as the server's JSON, with the hashcode of the
// whole registry. s.mu is held.
func (s *scriptedEureka) encode(insts []instance) []byte {
	byApp := map[string][]any{}
	for _, in := range insts {
		meta := map[string]string{"@class": "java.util.Collections$EmptyMap"}
		if len(in.Metadata) > 0 {
			meta = in.Metadata
		}
		byApp[in.App] = append(byApp[in.App], map[string]any{
			"instanceId": in.ID, "app": in.App, "hostName": in.HostName, "ipAddr": in.IPAddr,
			"status": in.Status, "overriddenStatus": "UNKNOWN",
			"port":       map[string]any{"$": in.Port, "@enabled": strconv.FormatBool(in.PortEnabled)},
			"securePort": map[string]any{"$": in.SecurePort, "@enabled": strconv.FormatBool(in.SecureEnabled)},
			"dataCenterInfo": map[string]string{
				"@class": "com.netflix.appinfo.InstanceInfo$DefaultDataCenterInfo", "name": "MyOwn"},
			"metadata": meta, "actionType": in.ActionType,
		})
	}
	apps := []any{}
	for name, list := range byApp {
		apps = append(apps, map[string]any{"name": name, "instance": list})
	}
	b, _ := json.Marshal(map[string]any{"applications": map[string]any{
		"versions__delta": "1", "apps__hashcode": reconcileHashcode(s.counts), "application": apps}})
	return b
}

// put registers or changes an instance; inDelta says whether the change
// enters the delta queue (false: a delta the bridge missed).
func (s *scriptedEureka) put(in instance, inDelta bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.apps[in.App] == nil {
		s.apps[in.App] = map[string]instance{}
	}
	in.ActionType = actionAdded
	if old, ok := s.apps[in.App][in.ID]; ok {
		in.ActionType = actionModified
		s.counts[old.Status]--
	}
	s.apps[in.App][in.ID] = in
	s.counts[in.Status]++
	s.full = nil
	if inDelta {
		s.delta = append(s.delta, in)
	}
}

// del deregisters an instance.
func (s *scriptedEureka) del(app, id string, inDelta bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in, ok := s.apps[app][id]
	if !ok {
		return
	}
	delete(s.apps[app], id)
	s.counts[in.Status]--
	s.full = nil
	if len(s.apps[app]) == 0 {
		delete(s.apps, app)
	}
	if inDelta {
		in.ActionType = actionDeleted
		s.delta = append(s.delta, in)
	}
}

// expire empties the delta queue (the retention window passed).
func (s *scriptedEureka) expire() {
	s.mu.Lock()
	s.delta = nil
	s.mu.Unlock()
}

func (s *scriptedEureka) setStatus(code int) {
	s.mu.Lock()
	s.status = code
	s.mu.Unlock()
}

// pause makes every request wait until resume.
func (s *scriptedEureka) pause() {
	s.mu.Lock()
	if s.hang == nil {
		s.hang = make(chan struct{})
	}
	s.mu.Unlock()
}

func (s *scriptedEureka) resume() {
	s.mu.Lock()
	if s.hang != nil {
		close(s.hang)
		s.hang = nil
	}
	s.mu.Unlock()
}

func (s *scriptedEureka) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.requests[path]
}

// upInstance is an UP instance of app on 127.0.0.1 (several per machine:
// each on its own port).
func upInstance(app string, port int) instance {
	return instance{App: app, ID: fmt.Sprintf("host-1:%s:%d", app, port), HostName: "host-1", IPAddr: "127.0.0.1",
		Status: StatusUp, Port: uint64(port), PortEnabled: true, SecurePort: 443}
}

var errNotYet = errors.New("not yet")

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }
