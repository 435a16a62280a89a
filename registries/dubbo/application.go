package dubbo

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
)

// Application-level metadata keys (Dubbo 3's ServiceInstance metadata).
const (
	// MetaEndpoints holds the process's ports: a JSON list of
	// {"port": 20880, "protocol": "dubbo"}.
	MetaEndpoints = "dubbo.endpoints"
	// MetaRevision is the revision of the application's MetadataInfo.
	MetaRevision = "dubbo.metadata.revision"
	// MetaStorageType is "local" (MetadataInfo served by the process's
	// MetadataService) or "remote" (written to the metadata report, e.g.
	// /<root>/<application>/<revision> in ZooKeeper).
	MetaStorageType = "dubbo.metadata.storage-type"
)

// Endpoint is one port of an application-level instance.
type Endpoint struct {
	Port     uint32 `json:"port"`
	Protocol string `json:"protocol"`
}

// AppInstance is one application-level registration: a Dubbo 3 process.
type AppInstance struct {
	// Application is the application name.
	Application string
	// Address and Port are the instance's own (its first endpoint's port).
	Address string
	Port    uint32
	// Endpoints are the process's ports from dubbo.endpoints, in their
	// order there; empty when the metadata has none.
	Endpoints []Endpoint
	// Revision and StorageType are dubbo.metadata.revision and
	// dubbo.metadata.storage-type.
	Revision, StorageType string
	// Weight is the weight metadata; 0 when absent or invalid (doc.go rule
	// 6). A registry with a weight of its own (Nacos) may set it when 0.
	Weight uint32
	// Metadata are the instance's metadata, unchanged.
	Metadata map[string]string
}

// serviceInstance is the Curator ServiceInstance JSON Dubbo writes at
// /services/<application>/<ip:port> (Curator's JsonInstanceSerializer;
// Dubbo's ZookeeperInstance payload).
type serviceInstance struct {
	Name    string `json:"name"`
	ID      string `json:"id"`
	Address string `json:"address"`
	Port    *int64 `json:"port"`
	Payload struct {
		Metadata map[string]string `json:"metadata"`
	} `json:"payload"`
}

// ParseServiceInstance parses the Curator ServiceInstance JSON of an
// application-level instance. It fails when the JSON is invalid, or the
// name, address or port (1-65535) is missing, or dubbo.endpoints is not a
// list of {port, protocol} with ports in 1-65535.
func ParseServiceInstance(data []byte) (AppInstance, error) {
	var si serviceInstance
	if err := json.Unmarshal(data, &si); err != nil {
		return AppInstance{}, fmt.Errorf("ServiceInstance JSON: %w", err)
	}
	if si.Port == nil || *si.Port < 1 || *si.Port > 65535 {
		return AppInstance{}, errors.New("ServiceInstance has no port in 1-65535")
	}
	return AppInstanceFromMetadata(si.Name, si.Address, uint32(*si.Port), si.Payload.Metadata)
}

// AppInstanceFromMetadata builds an AppInstance from its parts (in Nacos,
// the instance's service name, IP, port and metadata), checking them as
// ParseServiceInstance does.
func AppInstanceFromMetadata(application, address string, port uint32, metadata map[string]string) (AppInstance, error) {
	a := AppInstance{
		Application: application,
		Address:     address,
		Port:        port,
		Revision:    metadata[MetaRevision],
		StorageType: metadata[MetaStorageType],
		Metadata:    metadata,
	}
	switch {
	case application == "":
		return AppInstance{}, errors.New("ServiceInstance has no name (application)")
	case address == "":
		return AppInstance{}, errors.New("ServiceInstance has no address")
	case port == 0 || port > 65535:
		return AppInstance{}, fmt.Errorf("ServiceInstance port %d is not in 1-65535", port)
	}
	if w, err := strconv.ParseUint(metadata["weight"], 10, 32); err == nil {
		a.Weight = uint32(w)
	}
	if raw := metadata[MetaEndpoints]; raw != "" {
		if err := json.Unmarshal([]byte(raw), &a.Endpoints); err != nil {
			return AppInstance{}, fmt.Errorf("%s: %w", MetaEndpoints, err)
		}
		for _, e := range a.Endpoints {
			if e.Port == 0 || e.Port > 65535 {
				return AppInstance{}, fmt.Errorf("%s: port %d is not in 1-65535", MetaEndpoints, e.Port)
			}
		}
	}
	return a, nil
}

// IsApplicationInstance reports whether instance metadata are those of a
// Dubbo 3 application-level instance (dubbo.metadata.revision or
// dubbo.endpoints is set).
func IsApplicationInstance(metadata map[string]string) bool {
	_, rev := metadata[MetaRevision]
	_, eps := metadata[MetaEndpoints]
	return rev || eps
}

// MetadataInfo is an application's metadata (Dubbo 3 MetadataInfo): the
// services it exports, by service key. With remote storage it is the JSON at
// /<root>/<application>/<revision> in ZooKeeper.
type MetadataInfo struct {
	App      string                  `json:"app"`
	Revision string                  `json:"revision"`
	Services map[string]*ServiceInfo `json:"services"`
}

// ServiceInfo is one exported service of a MetadataInfo.
type ServiceInfo struct {
	Name     string            `json:"name"`
	Group    string            `json:"group"`
	Version  string            `json:"version"`
	Protocol string            `json:"protocol"`
	Port     int               `json:"port"`
	Path     string            `json:"path"`
	Params   map[string]string `json:"params"`
}

// ParseMetadataInfo parses a MetadataInfo JSON.
func ParseMetadataInfo(data []byte) (MetadataInfo, error) {
	var m MetadataInfo
	if err := json.Unmarshal(data, &m); err != nil {
		return MetadataInfo{}, fmt.Errorf("MetadataInfo JSON: %w", err)
	}
	return m, nil
}

// Methods returns the sorted union of the methods of every service of m
// (their methods params).
func (m MetadataInfo) Methods() []string {
	var out []string
	for _, s := range m.Services {
		if s != nil {
			out = append(out, splitMethods(s.Params["methods"])...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// id is the instance's ID: "<address>:<port>", the address as
// canonicalAddress spells it.
func (a AppInstance) id() string {
	return canonicalAddress(a.Address) + ":" + strconv.FormatUint(uint64(a.Port), 10)
}
