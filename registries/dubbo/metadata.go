package dubbo

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
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

// MetadataMethods returns the methods a MetadataInfo lists for its services
// (the union of their methods parameters, sorted), checking that it is
// app's of revision. An error names what is wrong with the JSON.
func MetadataMethods(data []byte, app, revision string) ([]string, error) {
	var info metadataInfo
	if err := json.Unmarshal(data, &info); err != nil {
		return nil, fmt.Errorf("decode MetadataInfo: %w", err)
	}
	if info.App != "" && info.App != app || info.Revision != "" && info.Revision != revision {
		return nil, fmt.Errorf("MetadataInfo of %s revision %s, want %s revision %s", info.App, info.Revision, app, revision)
	}
	var methods []string
	for _, svc := range info.Services {
		for _, m := range strings.Split(svc.Params["methods"], ",") {
			if m = strings.TrimSpace(m); m != "" {
				methods = append(methods, m)
			}
		}
	}
	slices.Sort(methods)
	return slices.Compact(methods), nil
}
