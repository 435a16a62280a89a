package translate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
)

// defaultHostTemplates are the registry types' default host templates, for
// golden inputs that name a type.
var defaultHostTemplates = map[string]string{"consul": consul.HostTemplate, "file": DefaultHostTemplate, "zookeeper": DefaultHostTemplate}

func mustNew(t testing.TB, opts Options) *Translator {
	t.Helper()
	if opts.Registry == "" {
		opts.Registry = "consul-dc1"
	}
	if opts.HostTemplate == "" {
		opts.HostTemplate = consul.HostTemplate
	}
	if opts.Namespace == "" {
		opts.Namespace = "meshbridge"
	}
	tr, err := New(opts)
	if err != nil {
		t.Fatalf("New(%+v): %v", opts, err)
	}
	return tr
}

func inst(id, address string, port uint32, protocol string) registries.Instance {
	return registries.Instance{ID: id, Address: address, Port: port, Protocol: protocol}
}

func mustTranslate(t testing.TB, tr *Translator, svc registries.Service, prev Sticky) Result {
	t.Helper()
	res, err := tr.Translate(svc, prev)
	if err != nil {
		t.Fatalf("Translate(%s): %v", svc.Name, err)
	}
	return res
}

// ownAnnotations returns an object's annotations less the content hash: the
// annotations ContentHash covers.
func ownAnnotations(a map[string]string) map[string]string {
	var out map[string]string
	for k, v := range a {
		if k == model.AnnotationHash {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

// resultOptions compare Results with cmp: protos by content, WorkloadEntry
// records as the objects they materialise.
var resultOptions = cmp.Options{
	protocmp.Transform(),
	cmp.Transformer("AsConfig", func(w *model.WorkloadEntry) *model.Config {
		if w == nil {
			return nil
		}
		return w.AsConfig()
	}),
}
