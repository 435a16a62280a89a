package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	versioned "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/translate"
)

// Change is one difference between the desired objects and the apiserver's.
type Change struct {
	Op  string
	Key model.ConfigKey
}

func (c Change) String() string { return c.Op + " " + c.Key.String() }

// Diff is DiffWith for a writer without an instance (output.instance
// unset): Options{Client: client, Namespace: namespace, Registries:
// registries, RegistrySynced: synced}.
func Diff(ctx context.Context, client versioned.Interface, namespace string, registries []string, synced func(registry string) bool, desired []*model.Config) ([]Change, error) {
	return DiffWith(ctx, Options{Client: client, Namespace: namespace, Registries: registries, RegistrySynced: synced}, desired)
}

// DiffWith lists the ServiceEntries and WorkloadEntries in opts.Namespace
// and returns what a Writer with these Options would do to make them match
// desired: the same decision (plan) on the same rules, with opts.Registries
// the known registries. A desired object that is absent is created; one of
// ours whose meshbridge.io/content-hash differs is updated; one of ours
// that is not desired is deleted unless opts.RegistrySynced reports its
// registry has not synced (nil: every registry has); a foreign object
// under a desired name is left alone (OpConflict). It writes nothing and
// uses opts.Client, opts.Namespace, opts.Instance, opts.Registries and
// opts.RegistrySynced only. Changes are sorted by op, kind and name. The
// error is the apiserver's (e.g. Forbidden without list permission).
func DiffWith(ctx context.Context, opts Options, desired []*model.Config) ([]Change, error) {
	switch {
	case opts.Client == nil:
		return nil, errors.New("kube: no client")
	case opts.Namespace == "":
		return nil, errors.New("kube: no namespace")
	}
	if err := translate.ValidateLabelValue(opts.Instance); err != nil {
		return nil, fmt.Errorf("kube: instance: %w", err)
	}
	live := map[model.ConfigKey]liveState{}
	for kind, kc := range kindClients(opts.Client) {
		objs, err := kc.list(ctx, opts.Namespace, "")
		if err != nil {
			return nil, fmt.Errorf("list %ss in %s: %w", kind, opts.Namespace, err)
		}
		for _, o := range objs {
			live[model.ConfigKey{Kind: kind, Namespace: opts.Namespace, Name: o.Name}] = stateOf(o)
		}
	}
	registries := slices.Clone(opts.Registries)
	rules := planRules{
		namespace: opts.Namespace, instance: opts.Instance, synced: opts.RegistrySynced,
		known: func(r string) bool { return slices.Contains(registries, r) },
	}
	actions := plan(rules, desired, live, nil)
	out := make([]Change, len(actions))
	for i, a := range actions {
		out[i] = Change{Op: a.op, Key: a.key}
	}
	return out, nil
}
