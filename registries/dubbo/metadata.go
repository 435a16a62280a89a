package dubbo

import (
	"fmt"
	"slices"

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
	info, err := ParseMetadataInfo(data)
	if err != nil {
		return RevisionMetadata{}, err
	}
	if info.App != "" && info.App != app || info.Revision != "" && info.Revision != revision {
		return RevisionMetadata{}, fmt.Errorf("MetadataInfo of %s revision %s, want %s revision %s", info.App, info.Revision, app, revision)
	}
	out := RevisionMetadata{Methods: info.Methods()}
	var defaults []registries.ProviderDefaults
	for _, svc := range info.Services {
		if svc != nil {
			defaults = append(defaults, providerDefaults(svc.Params))
		}
	}
	if len(defaults) > 0 && !slices.ContainsFunc(defaults, func(d registries.ProviderDefaults) bool { return d != defaults[0] }) {
		out.Defaults = defaults[0]
	}
	return out, nil
}
