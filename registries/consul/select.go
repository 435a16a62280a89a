package consul

import (
	"path"
	"slices"
)

// selectServices returns the listed services the registry follows, sorted
// by name (the order that decides which get their own watch). With no
// allow-list that is every service but Consul's own "consul"; with one, the
// services matching any glob (path.Match), "consul" included if listed.
func selectServices(listed map[string][]string, allow []string) []string {
	out := make([]string, 0, len(listed))
	for name := range listed {
		if allowed(name, allow) {
			out = append(out, name)
		}
	}
	slices.Sort(out)
	return out
}

func allowed(name string, allow []string) bool {
	if len(allow) == 0 {
		return name != "consul"
	}
	for _, g := range allow {
		if ok, _ := path.Match(g, name); ok {
			return true
		}
	}
	return false
}
