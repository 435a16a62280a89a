package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/pprof"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshbridge/meshbridge/kube"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/policy"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/eureka"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/xds"
	"github.com/meshbridge/meshbridge/xds/dns"
)

var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "meshbridge_build_info",
	Help: "Always 1; labels carry the build's version and Go version.",
}, []string{"version", "goversion"})

// newMetricsRegistry registers the Go and process metrics and meshbridge's
// own on a fresh registry.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	reg.MustRegister(metricCollectors()...)
	return reg
}

// metricCollectors are meshbridge's own metrics, every package's: the
// README's metrics table lists exactly these (metrics_test.go).
func metricCollectors() []prometheus.Collector {
	// Both results exist from the start at 0: the alert on failures must see
	// a pod's first one (increase() takes a series' first sample as its start).
	for _, result := range []string{"success", "failure"} {
		configReloads.WithLabelValues(result)
	}
	return slices.Concat([]prometheus.Collector{buildInfo, configReloads},
		registries.Collectors(), eureka.Collectors(), syncer.Collectors(), serviceentry.Collectors(), xds.Collectors(), dns.Collectors(), kube.Collectors(),
		policy.Collectors())
}

// httpHandler serves http.address: what a kubelet and Prometheus need and
// nothing that shows the mesh. /readyz is 200 only once the aggregate
// registry has synced (see readyz for what its body says).
func (b *bridge) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", b.readyz)
	return mux
}

// debugHandler serves http.debugAddress (loopback by default): every object
// served, registry and writer state, the running configuration with secrets
// redacted, and pprof. Secrets never appear on any page.
func (b *bridge) debugHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /debug/config", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, b.configPage())
	})
	mux.HandleFunc("GET /debug/configz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, configzOf(b.store))
	})
	mux.HandleFunc("GET /debug/kubez", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, b.kubez())
	})
	mux.HandleFunc("GET /debug/registryz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, b.registryz())
	})
	mux.HandleFunc("GET /debug/syncz", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, b.xds.SyncStatus())
	})
	// The DestinationRules read from policy.files: served, rejected (and
	// why), ignored documents, unreadable files (package policy).
	mux.HandleFunc("GET /debug/policyz", func(w http.ResponseWriter, _ *http.Request) {
		var st policy.Status
		if b.policy != nil {
			st = b.policy.Status()
		}
		writeJSON(w, st)
	})
	// Applies the removals a registry's delete guard holds (README
	// "Outages"): a write, so only on the debug address.
	mux.HandleFunc("POST /debug/registryz/{registry}/confirm", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("registry")
		n, err := b.syncer.ConfirmDeletes(name)
		switch {
		case errors.Is(err, syncer.ErrUnknownRegistry):
			http.Error(w, err.Error(), http.StatusNotFound)
			return
		case err != nil:
			http.Error(w, err.Error(), http.StatusConflict)
			return
		}
		b.log.Warn("Delete guard confirmed through the debug endpoint", "registry", name, "services", n,
			"remote", r.RemoteAddr)
		_, _ = fmt.Fprintf(w, "applied the removal of %d services of registry %s\n", n, name)
	})
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// kubez is /debug/kubez: the Kubernetes writer's state. LastError is the
// last error the writer logged (a failed write, list or watch, an object
// the apiserver refused), with its time.
type kubez struct {
	Enabled       bool      `json:"enabled"`
	Namespace     string    `json:"namespace,omitempty"`
	Leading       bool      `json:"leading"`
	Pending       int       `json:"pending"`
	LastResync    time.Time `json:"lastResync,omitzero"`
	LastError     string    `json:"lastError,omitempty"`
	LastErrorTime time.Time `json:"lastErrorTime,omitzero"`
}

func (b *bridge) kubez() kubez {
	if b.kube == nil {
		return kubez{}
	}
	w := b.kube.writer
	k := kubez{Enabled: true, Namespace: b.config().Output.Namespace, Leading: w.Leading(), Pending: w.Pending(), LastResync: w.LastResync()}
	k.LastError, k.LastErrorTime = b.kube.errs.last()
	return k
}

// registryzEntry is one registry on /debug/registryz: the sync step's view,
// the registry's read health and, for watchers that report one, the
// watcher's own status.
type registryzEntry struct {
	syncer.RegistryStatus
	// Up, Since and LastSuccess come from the registry's read health
	// (registries.Health), as do errors, lastError and lastErrorTime when
	// the registry tracks it.
	Up          bool      `json:"up"`
	Since       time.Time `json:"since,omitzero"`
	LastSuccess time.Time `json:"lastSuccess,omitzero"`
	// Failing names the readers whose last read failed (registries.
	// HealthStatus.Failing): what keeps a registry read by several down.
	Failing []string `json:"failing,omitempty"`
	// Stale is true while anything of the registry is served from
	// last-known-good state: it is down, some services' last read failed,
	// or it is served from disk. It shadows RegistryStatus.Stale, which
	// knows only what the sync step saw.
	Stale   bool `json:"stale"`
	Watcher any  `json:"watcher,omitempty"`
}

func (b *bridge) registryz() []registryzEntry {
	regs := make(map[string]registries.Registry)
	for _, r := range b.pipe.Registries() {
		regs[r.Name()] = r.Watcher
	}
	var out []registryzEntry
	for _, st := range b.syncer.Status() {
		e := registryzEntry{RegistryStatus: st}
		r := regs[st.Name]
		if hr, ok := r.(registries.HealthReporter); ok {
			h := hr.Health()
			e.Up, e.Since, e.LastSuccess, e.Failing = h.Up, h.Since, h.LastSuccess, h.Failing
			e.Errors, e.LastError, e.LastErrorTime = int(h.Errors), h.LastError, h.LastErrorTime
			e.Stale = st.Synced && !h.Up
		} else {
			e.Up = st.Synced && st.StaleServices == 0
		}
		e.Stale = e.Stale || st.StaleServices > 0 || st.Stale
		if sr, ok := r.(registries.StatusReporter); ok {
			e.Watcher = sr.WatcherStatus()
		}
		out = append(out, e)
	}
	return out
}

// readyz is /readyz. It answers 503 until the aggregate registry has synced
// (every registry delivered its first listing, or sync.timeout passed) and
// the xDS listeners are open (after the first full push), then 200: serving last-known-good state is correct, so an outage does not take
// the bridge out of its Service. The body says what is degraded, one line
// per registry: not synced (nothing of it is served), or unreachable (served
// from last-known-good).
func (b *bridge) readyz(w http.ResponseWriter, _ *http.Request) {
	select {
	case <-b.ready:
	default:
		http.Error(w, "waiting for every registry's first listing (sync.timeout "+b.config().Sync.Timeout.String()+")",
			http.StatusServiceUnavailable)
		return
	}
	select {
	case <-b.xds.Serving():
	default:
		http.Error(w, "waiting for the xDS listeners to open after the first full push", http.StatusServiceUnavailable)
		return
	}
	var lines []string
	for _, e := range b.registryz() {
		switch {
		case e.FromDisk:
			lines = append(lines, fmt.Sprintf("registry %s: served from its persisted listing (state.dir) until it answers; last error: %s",
				e.Name, cmp.Or(e.LastError, "none")))
		case !e.Synced:
			lines = append(lines, fmt.Sprintf("registry %s: no complete listing yet (sync.timeout passed): its services are not served; last error: %s",
				e.Name, cmp.Or(e.LastError, "none")))
		case e.Stale:
			lines = append(lines, fmt.Sprintf("registry %s: serving last-known-good state (up: %v, since %s, %d stale services); last error: %s",
				e.Name, e.Up, e.Since.Format(time.RFC3339), e.StaleServices, cmp.Or(e.LastError, "none")))
		}
		if g := e.DeleteGuard; g != nil {
			lines = append(lines, fmt.Sprintf("registry %s: the delete guard holds the removal of %d services (%d instances) since %s",
				e.Name, g.Services, g.Instances, g.Since.Format(time.RFC3339)))
		}
	}
	if len(lines) == 0 {
		_, _ = w.Write([]byte("ok\n"))
		return
	}
	_, _ = fmt.Fprintf(w, "ok, degraded:\n%s\n", strings.Join(lines, "\n"))
}

// configzEntry is one store object on /debug/configz.
type configzEntry struct {
	Kind            model.Kind        `json:"kind"`
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	ResourceVersion uint64            `json:"resourceVersion,string"`
	Labels          map[string]string `json:"labels,omitempty"`
	Annotations     map[string]string `json:"annotations,omitempty"`
	Spec            json.RawMessage   `json:"spec"`
}

func configzOf(store *serviceentry.Store) []configzEntry {
	var out []configzEntry
	for _, kind := range []model.Kind{model.KindServiceEntry, model.KindWorkloadEntry} {
		for _, c := range store.List(kind, "") {
			spec, _ := protojson.Marshal(c.Spec)
			out = append(out, configzEntry{Kind: c.Kind, Namespace: c.Namespace, Name: c.Name,
				ResourceVersion: c.ResourceVersion, Labels: c.Labels, Annotations: c.OutputAnnotations(), Spec: spec})
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}
