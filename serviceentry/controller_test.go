package serviceentry

import (
	"testing"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

func newTestController(t *testing.T) (*Store, *Controller, *recordingUpdater) {
	t.Helper()
	s := NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry)
	rec := &recordingUpdater{}
	c := NewController(s, rec, nil)
	runStore(t, s)
	return s, c, rec
}

func mustCreate(t *testing.T, s *Store, cfg *model.Config) {
	t.Helper()
	if _, err := s.Create(cfg); err != nil {
		t.Fatal(err)
	}
}

func mustUpdate(t *testing.T, s *Store, cfg *model.Config) {
	t.Helper()
	if _, err := s.Update(cfg); err != nil {
		t.Fatal(err)
	}
}

// Each step runs on the state the previous steps left: the controller is a
// state machine, and these are its rules in the order an operator meets them.
func TestControllerPushes(t *testing.T) {
	s, c, rec := newTestController(t)

	// A workload before its entry: nothing selects it yet.
	mustCreate(t, s, weConfig("a-1", "a.example", "10.0.0.1"))
	flush(t, s)
	rec.strictMatch(t)

	// The entry arrives: one full push, its endpoints cached without a push.
	mustCreate(t, s, seConfig("a.example"))
	flush(t, s)
	rec.strictMatch(t, "svc a.example.ns add", "edscache a.example.ns 1", "full a.example.ns service")

	// A second workload: incremental EDS only.
	mustCreate(t, s, weConfig("a-2", "a.example", "10.0.0.2"))
	flush(t, s)
	rec.strictMatch(t, "eds a.example.ns 2")
	if got := len(c.Endpoints("ns", "a.example")); got != 2 {
		t.Fatalf("Endpoints = %d, want 2", got)
	}

	// An entry update that leaves the service equal: EDS only.
	same := seConfig("a.example")
	same.Annotations = map[string]string{"touched": "yes"}
	mustUpdate(t, s, same)
	flush(t, s)
	rec.strictMatch(t, "eds a.example.ns 2")

	// A port change: full push for that host.
	mustUpdate(t, s, seConfig("a.example", func(se *networking.ServiceEntry) { se.Ports[0].Number = 9090 }))
	flush(t, s)
	rec.strictMatch(t, "svc a.example.ns update", "edscache a.example.ns 2", "full a.example.ns service")

	// A workload relabelled to another service leaves the first by EDS.
	mustCreate(t, s, seConfig("b.example"))
	flush(t, s)
	rec.take()
	mustUpdate(t, s, weConfig("a-2", "b.example", "10.0.0.2"))
	flush(t, s)
	rec.strictMatch(t, "eds a.example.ns 1", "eds b.example.ns 1")

	// A workload deleted: EDS for its service.
	if err := s.Delete(model.KindWorkloadEntry, "a-1", "ns", 0); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	rec.strictMatch(t, "eds a.example.ns 0")

	// The entry deleted: full push, and the service is gone.
	if err := s.Delete(model.KindServiceEntry, "a.example", "ns", 0); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	rec.strictMatch(t, "svc a.example.ns delete", "full a.example.ns service")
	for _, svc := range c.Services() {
		if svc.Hostname == "a.example" {
			t.Fatal("a.example still listed after delete")
		}
	}
}

// TestControllerDNSWorkloadPushesEDS: a DNS-resolution entry's workloads
// come and go by EDS, the last one's deletion included (meshbridge's clusters
// are type EDS; Istio pushes fully here).
func TestControllerDNSWorkloadPushesEDS(t *testing.T) {
	s, _, rec := newTestController(t)
	mustCreate(t, s, seConfig("d.example", func(se *networking.ServiceEntry) { se.Resolution = networking.ServiceEntry_DNS }))
	flush(t, s)
	rec.take()
	mustCreate(t, s, weConfig("d-1", "d.example", "backend.internal"))
	flush(t, s)
	rec.strictMatch(t, "eds d.example.ns 1")
	if err := s.Delete(model.KindWorkloadEntry, "d-1", "ns", 0); err != nil {
		t.Fatal(err)
	}
	flush(t, s)
	rec.strictMatch(t, "eds d.example.ns 0")
}

// TestControllerUpdatesNoGeneratorReads: a ServiceEntry update that changes
// only what no CDS, LDS or RDS generator reads (labels, exportTo, addresses,
// resolution, location, the selector) pushes the host's endpoints as EDS,
// never fully; a port change still pushes fully.
func TestControllerUpdatesNoGeneratorReads(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*networking.ServiceEntry)
		want   []string
	}{
		{"labels", nil, []string{"eds u.example.ns 1"}},
		{"exportTo", func(se *networking.ServiceEntry) { se.ExportTo = []string{"."} }, []string{"eds u.example.ns 1"}},
		{"addresses", func(se *networking.ServiceEntry) { se.Addresses = []string{"240.0.0.1"} }, []string{"eds u.example.ns 1"}},
		{"resolution", func(se *networking.ServiceEntry) { se.Resolution = networking.ServiceEntry_DNS }, []string{"eds u.example.ns 1"}},
		{"location", func(se *networking.ServiceEntry) { se.Location = networking.ServiceEntry_MESH_EXTERNAL }, []string{"eds u.example.ns 1"}},
		{"selector that selects nothing", func(se *networking.ServiceEntry) {
			se.WorkloadSelector = &networking.WorkloadSelector{Labels: map[string]string{"app": "none"}}
		}, []string{"eds u.example.ns 0"}},
		{"port", func(se *networking.ServiceEntry) { se.Ports[0].Number = 9090 },
			[]string{"svc u.example.ns update", "edscache u.example.ns 1", "full u.example.ns service"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, _, rec := newTestController(t)
			mustCreate(t, s, seConfig("u.example"))
			mustCreate(t, s, weConfig("u-1", "u.example", "10.0.0.1"))
			flush(t, s)
			rec.take()
			var muts []func(*networking.ServiceEntry)
			if tc.mutate != nil {
				muts = append(muts, tc.mutate)
			}
			cfg := seConfig("u.example", muts...)
			cfg.Labels = map[string]string{"team": "x"}
			mustUpdate(t, s, cfg)
			flush(t, s)
			rec.strictMatch(t, tc.want...)
		})
	}
}

func TestControllerInlineEndpoints(t *testing.T) {
	s, c, rec := newTestController(t)
	inline := func(addrs ...string) *model.Config {
		return seConfig("i.example", func(se *networking.ServiceEntry) {
			se.WorkloadSelector = nil
			for _, a := range addrs {
				se.Endpoints = append(se.Endpoints, &networking.WorkloadEntry{Address: a, Ports: map[string]uint32{"grpc-8080": 9000}})
			}
		})
	}
	mustCreate(t, s, inline("10.0.0.1"))
	flush(t, s)
	rec.strictMatch(t, "svc i.example.ns add", "edscache i.example.ns 1", "full i.example.ns service")
	mustUpdate(t, s, inline("10.0.0.1", "10.0.0.2"))
	flush(t, s)
	rec.strictMatch(t, "eds i.example.ns 2")
	eps := c.Endpoints("ns", "i.example")
	if len(eps) != 2 || eps[0].EndpointPort != 9000 || eps[0].ServicePortName != "grpc-8080" {
		t.Fatalf("Endpoints = %+v", eps)
	}
}
