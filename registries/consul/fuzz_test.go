package consul

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/translate/translatetest"
)

// FuzzInstancesFrom converts a /v1/health/service answer (JSON, as the
// agent sends it) into instances and translates the service they make. It
// checks that neither panics; that instanceFrom keeps a registered port
// outside 1-65535 outside it (translate then rejects the instance) and puts
// every weight at or above the default weight (Consul's weights are at
// least 1); that the instances are sorted by ID and sameInstances holds
// them equal in any order; and that the translation passes translatetest.Check.
func FuzzInstancesFrom(f *testing.F) {
	f.Add([]byte(`[{"Node":{"Node":"n1","Address":"10.0.0.1","Datacenter":"dc1"},`+
		`"Service":{"ID":"web-1","Service":"web","Tags":["version=v1","primary"],"Address":"","Port":8080,`+
		`"Meta":{"protocol":"http","zone":"z1"},"Weights":{"Passing":3,"Warning":1}},`+
		`"Checks":[{"CheckID":"serfHealth","Status":"passing"},{"CheckID":"c","ServiceID":"web-1","Status":"passing"}]}]`),
		true, "dc1", "web", false)
	f.Add([]byte(`[{"Node":{"Node":"n2","Address":"10.0.0.2","Meta":{"zone":"node zone"}},`+
		`"Service":{"ID":"api-1","Service":"api","Address":"api.example.com","Port":9090,"Meta":{"protocol":"grpc"},`+
		`"Weights":{"Passing":1,"Warning":5}},"Checks":[{"CheckID":"c","ServiceID":"api-1","Status":"warning"}]},`+
		`{"Node":{"Node":"n3","Address":"::1"},"Service":{"ID":"api-2","Service":"api","Port":0}},`+
		`{"Node":{"Node":"n4","Address":"10.0.0.4"},"Service":{"ID":"p","Kind":"connect-proxy","Port":21000}},`+
		`null,{"Node":null,"Service":{"ID":"x"}}]`),
		false, "dc2", "api", true)
	f.Add([]byte(`[{"Node":{"Node":"n1","Address":"10.0.0.1"},"Service":{"ID":"a","Port":80,`+
		`"Tags":["=v","k=v=w","Bad Tag","istio.io/rev=x"],"Meta":{"k":"meta wins","subzone":"r1"}},`+
		`"Checks":[{"CheckID":"_service_maintenance:a","ServiceID":"a","Status":"critical"}]},`+
		`{"Node":{"Node":"n1","Address":"10.0.0.1"},"Service":{"ID":"b","Port":80}}]`),
		true, "", "Web_Service", false)
	trs := translatetest.Translators(f, HostTemplate)
	f.Fuzz(func(t *testing.T, payload []byte, healthyOnly bool, datacenter, name string, remote bool) {
		var entries []*api.ServiceEntry
		if json.Unmarshal(payload, &entries) != nil {
			return
		}
		for _, e := range entries {
			if e == nil || e.Service == nil || e.Node == nil {
				continue
			}
			for _, warning := range []bool{false, true} {
				inst := instanceFrom(e, warning, datacenter)
				if p := e.Service.Port; (p < 1 || p > 65535) && inst.Port >= 1 && inst.Port <= 65535 {
					t.Fatalf("registered port %d became port %d", p, inst.Port)
				}
				if inst.Weight < model.DefaultWeight {
					t.Fatalf("weights %+v (warning %v) became weight %d, below the default %d",
						e.Service.Weights, warning, inst.Weight, model.DefaultWeight)
				}
			}
		}
		instances := instancesFrom(entries, healthyOnly, datacenter)
		if !slices.IsSortedFunc(instances, func(a, b registries.Instance) int { return strings.Compare(a.ID, b.ID) }) {
			t.Fatalf("instances are not sorted by ID")
		}
		reversed := slices.Clone(instances)
		slices.Reverse(reversed)
		if !registries.SameInstances(instances, reversed) {
			t.Fatalf("sameInstances does not hold the instances equal to themselves in another order")
		}
		svc := registries.Service{Name: name, Instances: instances}
		if remote {
			svc.Datacenter = datacenter
		}
		translatetest.Check(t, trs, svc)
	})
}
