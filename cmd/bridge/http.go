package main

import (
	"encoding/json"
	"net/http"
	"net/http/pprof"
	"runtime"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/meshbridge/meshbridge/kube"
	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/xds"
)

var buildInfo = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "meshbridge_build_info",
	Help: "Always 1; labels carry the build's version and Go version.",
}, []string{"version", "goversion"})

// newMetricsRegistry registers every package's metrics on a fresh registry.
func newMetricsRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}), buildInfo)
	buildInfo.WithLabelValues(version, runtime.Version()).Set(1)
	for _, group := range [][]prometheus.Collector{
		registries.Collectors(), serviceentry.Collectors(), xds.Collectors(), kube.Collectors(),
	} {
		reg.MustRegister(group...)
	}
	return reg
}

// httpHandler serves the operator endpoints. /readyz is 200 only once the
// aggregate registry has synced; secrets never appear on any page (the
// configuration is not served, only the store's objects and registry state).
func (b *bridge) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(b.metrics, promhttp.HandlerOpts{}))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-b.ready:
			_, _ = w.Write([]byte("ok\n"))
		default:
			http.Error(w, "waiting for every registry's first listing", http.StatusServiceUnavailable)
		}
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
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// kubez is /debug/kubez: the Kubernetes writer's state.
type kubez struct {
	Enabled    bool      `json:"enabled"`
	Namespace  string    `json:"namespace,omitempty"`
	Leading    bool      `json:"leading"`
	Pending    int       `json:"pending"`
	LastResync time.Time `json:"lastResync,omitzero"`
}

func (b *bridge) kubez() kubez {
	if b.kube == nil {
		return kubez{}
	}
	w := b.kube.writer
	return kubez{Enabled: true, Namespace: b.cfg.Output.Namespace, Leading: w.Leading(), Pending: w.Pending(), LastResync: w.LastResync()}
}

// registryzEntry is one registry on /debug/registryz: the sync step's view
// and, for watchers that report one, the watcher's own status.
type registryzEntry struct {
	serviceentry.RegistryStatus
	Watcher any `json:"watcher,omitempty"`
}

// consulStatus is what a Consul watcher reports about itself.
type consulStatus interface{ Status() consul.Status }

func (b *bridge) registryz() []registryzEntry {
	watchers := make(map[string]any, len(b.regs))
	for _, r := range b.regs {
		if cs, ok := r.(consulStatus); ok {
			watchers[r.Name()] = cs.Status()
		}
	}
	var out []registryzEntry
	for _, st := range b.syncer.Status() {
		out = append(out, registryzEntry{RegistryStatus: st, Watcher: watchers[st.Name]})
	}
	return out
}

// configzEntry is one store object on /debug/configz.
type configzEntry struct {
	Kind            model.Kind        `json:"kind"`
	Namespace       string            `json:"namespace"`
	Name            string            `json:"name"`
	ResourceVersion string            `json:"resourceVersion"`
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
				ResourceVersion: c.ResourceVersion, Labels: c.Labels, Annotations: c.Annotations, Spec: spec})
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
