package dubbo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// MetadataPaths are where an application's MetadataInfo of revision lies in
// a ZooKeeper metadata report under root ("/dubbo"), in the order a reader
// tries them (doc.go rule 9): Apache Dubbo (Java) writes
// <root>/metadata/<application>/<revision>, dubbo-go
// <root>/<application>/<revision>.
func MetadataPaths(root, app, revision string) []string {
	return []string{root + "/metadata/" + app + "/" + revision, root + "/" + app + "/" + revision}
}

// metadataInfo is the JSON of Dubbo 3's MetadataInfo, as both
// implementations write it to a metadata report: the application's
// services, each with its URL parameters (methods among them).
type metadataInfo struct {
	App      string `json:"app"`
	Revision string `json:"revision"`
	Services map[string]struct {
		Name   string            `json:"name"`
		Params map[string]string `json:"params"`
	} `json:"services"`
}

// RevisionMetadata is what one revision of an application's MetadataInfo
// says of the instances that name it: its methods (the union of its
// services' methods parameters, sorted) and its call defaults (the timeout,
// retries and loadbalance parameters, when every service declares the same;
// none when they differ, since an application-level host is one route for
// every interface, and each interface-level host has its own).
type RevisionMetadata struct {
	Methods  []string
	Defaults registries.ProviderDefaults
}

// ReadMetadata returns what a MetadataInfo JSON says (RevisionMetadata),
// checking that it is app's of revision. An error names what is wrong with
// the JSON.
func ReadMetadata(data []byte, app, revision string) (RevisionMetadata, error) {
	var info metadataInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return RevisionMetadata{}, fmt.Errorf("decode MetadataInfo: %w", err)
	}
	if info.App != "" && info.App != app || info.Revision != "" && info.Revision != revision {
		return RevisionMetadata{}, fmt.Errorf("MetadataInfo of %s revision %s, want %s revision %s", info.App, info.Revision, app, revision)
	}
	var (
		out      RevisionMetadata
		defaults []registries.ProviderDefaults
	)
	for _, svc := range info.Services {
		for _, m := range strings.Split(svc.Params["methods"], ",") {
			if m = strings.TrimSpace(m); m != "" {
				out.Methods = append(out.Methods, m)
			}
		}
		defaults = append(defaults, providerDefaults(svc.Params))
	}
	slices.Sort(out.Methods)
	out.Methods = slices.Compact(out.Methods)
	if len(defaults) > 0 && !slices.ContainsFunc(defaults, func(d registries.ProviderDefaults) bool { return d != defaults[0] }) {
		out.Defaults = defaults[0]
	}
	return out, nil
}
