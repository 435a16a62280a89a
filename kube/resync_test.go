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
// older rejections are forgotten. A listed copy newer than meshbridge's last
// write of it (edited by hand meanwhile) keeps that write's resourceVersion
// as the one known in sync, so plan applies the object again.
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
	// Written before the list: one unchanged since, one edited by hand.
	w.learn(key("unchanged"), liveState{hash: "h", uid: "u4", rv: "5"}, fromWrite)
	w.learn(key("edited"), liveState{hash: "h", uid: "u5", rv: "5"}, fromWrite)
	w.kinds = map[model.Kind]kindClient{model.KindServiceEntry: slowListKindClient{
		listed: []*liveObject{
			{Name: "written", Hash: "before", UID: "u1", ResourceVersion: "3"},
			{Name: "deleted", Hash: "h", UID: "u2", ResourceVersion: "3"},
			{Name: "untouched", Hash: "h", UID: "u3", ResourceVersion: "3"},
			{Name: "unchanged", Hash: "h", UID: "u4", ResourceVersion: "5"},
			{Name: "edited", Hash: "h", UID: "u5", ResourceVersion: "7", Owned: owned{generation: 2}},
		},
		during: func() {
			w.learn(key("written"), liveState{hash: "after", uid: "u1", rv: "4"}, fromWrite)
			w.forget(key("deleted"), "u2", true)
			w.learn(key("foreign"), liveState{managedBy: "someone", uid: "u9", rv: "2"}, fromList)
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
	if st, ok := w.state(key("foreign")); !ok || st.managedBy != "someone" {
		t.Errorf("foreign: %+v %v, want the foreign object", st, ok)
	}
	if st, ok := w.state(key("untouched")); !ok || st.uid != types.UID("u3") || st.applied != "3" {
		t.Errorf("untouched: %+v %v, want the listed object, in sync", st, ok)
	}
	if st, ok := w.state(key("unchanged")); !ok || st.rv != "5" || st.applied != "5" {
		t.Errorf("unchanged: %+v %v, want rv 5 in sync", st, ok)
	}
	if st, ok := w.state(key("edited")); !ok || st.rv != "7" || st.applied != "5" {
		t.Errorf("edited: %+v %v, want rv 7 with 5 in sync (to be applied again)", st, ok)
	}
	if _, ok := w.rejected[key("new-refusal")]; !ok {
		t.Error("a refusal learnt during the list was forgotten")
	}
	if _, ok := w.rejected[key("old-refusal")]; ok {
		t.Error("a refusal older than the list was kept")
	}
}
