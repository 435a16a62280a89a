package kube

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	versioned "istio.io/client-go/pkg/clientset/versioned"

	"github.com/meshbridge/meshbridge/model"
)

// Diff operations, in the order a Change list sorts them.
const (
	OpCreate   = "create"
	OpUpdate   = "update"
	OpDelete   = "delete"
	OpConflict = "conflict" // the name is held by an object without our labels; left alone
)

// Change is one difference between the desired objects and the apiserver's.
type Change struct {
	Op  string
	Key model.ConfigKey
}

func (c Change) String() string { return c.Op + " " + c.Key.String() }

// Diff lists the ServiceEntries and WorkloadEntries in namespace and returns
// what a Writer for these registries would do to make them match desired:
// create a desired object that is absent, update one of ours whose
// meshbridge.io/content-hash differs, delete one of ours that is not desired,
// and leave a foreign object under a desired name alone (OpConflict). It
// writes nothing. Changes are sorted by op, kind and name. The error is the
// apiserver's (e.g. Forbidden without list permission).
func Diff(ctx context.Context, client versioned.Interface, namespace string, registries []string, desired []*model.Config) ([]Change, error) {
	w := &Writer{opts: Options{Registries: registries}}
	want := make(map[model.ConfigKey]*model.Config, len(desired))
	for _, c := range desired {
		if c.Namespace == namespace {
			want[c.Key()] = c
		}
	}
	var out []Change
	for kind, kc := range kindClients(client) {
		objs, err := kc.list(ctx, namespace, "")
		if err != nil {
			return nil, fmt.Errorf("list %ss in %s: %w", kind, namespace, err)
		}
		for _, o := range objs {
			key := model.ConfigKey{Kind: kind, Namespace: namespace, Name: o.Name}
			d, ok := want[key]
			delete(want, key)
			switch {
			case !w.isOurs(o.Labels):
				if ok {
					out = append(out, Change{OpConflict, key})
				}
			case !ok:
				out = append(out, Change{OpDelete, key})
			case o.Hash != d.ContentHash() || o.Hash == "":
				out = append(out, Change{OpUpdate, key})
			}
		}
	}
	for key := range want {
		out = append(out, Change{OpCreate, key})
	}
	order := map[string]int{OpCreate: 0, OpUpdate: 1, OpDelete: 2, OpConflict: 3}
	slices.SortFunc(out, func(a, b Change) int {
		return cmp.Or(cmp.Compare(order[a.Op], order[b.Op]), strings.Compare(string(a.Key.Kind), string(b.Key.Kind)),
			strings.Compare(a.Key.Name, b.Key.Name))
	})
	return out, nil
}
