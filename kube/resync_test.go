package kube

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/serviceentry"
)

// slowListKindClient is a fake for an ordering the real apiserver cannot be
// made to produce on demand: while its list is in flight, the test records
// what a worker learnt in the meantime. Only list is implemented.
type slowListKindClient struct {
	kindClient
	listed []*liveObject
	during func()
}

func (c slowListKindClient) list(context.Context, string, string) ([]*liveObject, error) {
	c.during()
	return c.listed, nil
}

// TestResyncKeepsWhatWorkersLearntDuringTheList: a resync's list is older
// than what workers learnt while it was in flight (a foreign object found, a
// write's response, a delete, a refused content), so those survive the swap;
// older rejections are forgotten.
func TestResyncKeepsWhatWorkersLearntDuringTheList(t *testing.T) {
	key := func(name string) model.ConfigKey {
		return model.ConfigKey{Kind: model.KindServiceEntry, Namespace: "mesh", Name: name}
	}
	w := &Writer{
		opts: Options{Namespace: "mesh"},
		log:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		src:  serviceentry.NewStore(nil, model.KindServiceEntry, model.KindWorkloadEntry),
		queue: workqueue.NewTypedRateLimitingQueue(
			workqueue.NewTypedItemExponentialFailureRateLimiter[model.ConfigKey](baseRetryDelay, MaxRetryDelay)),
		live:        map[model.ConfigKey]liveState{},
		rejected:    map[model.ConfigKey]rejection{},
		outstanding: map[model.ConfigKey]struct{}{},
	}
	defer w.queue.ShutDown()
	w.reject(key("old-refusal"), "h0", nil)
	w.kinds = map[model.Kind]kindClient{model.KindServiceEntry: slowListKindClient{
		listed: []*liveObject{
			{Name: "written", Hash: "before", UID: "u1"},
			{Name: "deleted", Hash: "h", UID: "u2"},
			{Name: "untouched", Hash: "h", UID: "u3"},
		},
		during: func() {
			w.setState(key("written"), liveState{hash: "after", uid: "u1"}, true)
			w.setState(key("deleted"), liveState{}, false)
			w.setState(key("foreign"), liveState{foreign: true}, true)
			w.reject(key("new-refusal"), "h1", nil)
		},
	}}
	if err := w.resync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if st, ok := w.state(key("written")); !ok || st.hash != "after" {
		t.Errorf("written: %+v %v, want the write's response (hash after)", st, ok)
	}
	if st, ok := w.state(key("deleted")); ok {
		t.Errorf("deleted: %+v, want unknown", st)
	}
	if st, ok := w.state(key("foreign")); !ok || !st.foreign {
		t.Errorf("foreign: %+v %v, want foreign", st, ok)
	}
	if st, ok := w.state(key("untouched")); !ok || st.uid != types.UID("u3") {
		t.Errorf("untouched: %+v %v, want the listed object", st, ok)
	}
	if _, ok := w.rejected[key("new-refusal")]; !ok {
		t.Error("a refusal learnt during the list was forgotten")
	}
	if _, ok := w.rejected[key("old-refusal")]; ok {
		t.Error("a refusal older than the list was kept")
	}
}
