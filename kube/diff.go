package kube

import (
	"context"
	"fmt"

	versioned "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshbridge/meshbridge/model"
)

// Change is one difference between the desired objects and the apiserver's.
type Change struct {
	Op  string
	Key model.ConfigKey
}

func (c Change) String() string { return c.Op + " " + c.Key.String() }

// Diff lists the ServiceEntries and WorkloadEntries in namespace and returns
// what a Writer with these registries would do to make them match desired:
// the same decision (plan) on the same rules. A desired object that is absent
// is created; one of ours whose meshbridge.io/content-hash differs is
// updated; one of ours that is not desired is deleted unless synced reports
// its registry has not synced (nil: every registry has); a foreign object
// under a desired name is left alone (OpConflict). It writes nothing.
// Changes are sorted by op, kind and name. The error is the apiserver's
// (e.g. Forbidden without list permission).
func Diff(ctx context.Context, client versioned.Interface, namespace string, registries []string, synced func(registry string) bool, desired []*model.Config) ([]Change, error) {
	live := map[model.ConfigKey]liveState{}
	for kind, kc := range kindClients(client) {
		objs, err := kc.list(ctx, namespace, "")
		if err != nil {
			return nil, fmt.Errorf("list %ss in %s: %w", kind, namespace, err)
		}
		for _, o := range objs {
			live[model.ConfigKey{Kind: kind, Namespace: namespace, Name: o.Name}] = stateOf(o)
		}
	}
	rules := planRules{namespace: namespace, registries: registries, synced: synced}
	actions := plan(rules, desired, live, nil)
	out := make([]Change, len(actions))
	for i, a := range actions {
		out[i] = Change{Op: a.op, Key: a.key}
	}
	return out, nil
}
