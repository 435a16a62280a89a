package registries

import (
	"cmp"
	"maps"
	"slices"
)

// SameService reports whether a and b are the same service as a Snapshot
// describes it, instances aside: every field of Service but Instances.
func SameService(a, b Service) bool {
	return a.Name == b.Name && a.Host == b.Host && a.Datacenter == b.Datacenter && a.Namespace == b.Namespace &&
		a.Group == b.Group && slices.Equal(a.Ports, b.Ports) && a.PortPerProtocol == b.PortPerProtocol &&
		a.HostError == b.HostError
}

// SameInstances reports whether two instance lists hold the same instances,
// whatever their order, duplicates included: every field of each instance
// is compared.
func SameInstances(a, b []Instance) bool {
	if len(a) != len(b) {
		return false
	}
	if slices.EqualFunc(a, b, sameInstance) {
		return true // the common case: both in the registry's order
	}
	a, b = slices.Clone(a), slices.Clone(b)
	slices.SortFunc(a, compareInstances)
	slices.SortFunc(b, compareInstances)
	return slices.EqualFunc(a, b, sameInstance)
}

func sameInstance(x, y Instance) bool {
	return x.ID == y.ID && x.Address == y.Address && x.Port == y.Port && x.Protocol == y.Protocol &&
		x.Weight == y.Weight && x.Locality == y.Locality && maps.Equal(x.Labels, y.Labels) &&
		slices.Equal(x.Ports(), y.Ports()) && slices.Equal(x.Methods(), y.Methods()) && x.Invalid() == y.Invalid()
}

// compareInstances is a total order on instances (every field sameInstance
// compares), so that equal lists sort equal.
func compareInstances(x, y Instance) int {
	return cmp.Or(cmp.Compare(x.ID, y.ID), cmp.Compare(x.Address, y.Address), cmp.Compare(x.Port, y.Port),
		cmp.Compare(x.Protocol, y.Protocol), cmp.Compare(x.Weight, y.Weight), cmp.Compare(x.Locality, y.Locality),
		compareLabels(x.Labels, y.Labels), cmp.Compare(x.Invalid(), y.Invalid()),
		slices.CompareFunc(x.Ports(), y.Ports(), func(p, q Port) int {
			return cmp.Or(cmp.Compare(p.Number, q.Number), cmp.Compare(p.Protocol, q.Protocol))
		}),
		slices.Compare(x.Methods(), y.Methods()))
}

// compareLabels orders label maps by their sorted keys, then values.
func compareLabels(a, b map[string]string) int {
	if c := cmp.Compare(len(a), len(b)); c != 0 || len(a) == 0 {
		return c
	}
	ka, kb := slices.Sorted(maps.Keys(a)), slices.Sorted(maps.Keys(b))
	if c := slices.Compare(ka, kb); c != 0 {
		return c
	}
	for _, k := range ka {
		if c := cmp.Compare(a[k], b[k]); c != 0 {
			return c
		}
	}
	return 0
}
