package zookeeper

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// Spring Cloud Zookeeper's instance metadata keys (ZookeeperInstance's
// metadata map; StatusConstants), and the keys meshbridge reads like the
// other registries do.
const (
	// SpringStatusKey holds an instance's status: UP, OUT_OF_SERVICE, ...;
	// absent means UP (Spring Cloud Zookeeper's own rule, for instances
	// registered before it had statuses).
	SpringStatusKey = "instance_status"
	SpringStatusUp  = "UP"
	// SpringProtocolKey declares the protocol of the instance's port;
	// absent means http (Spring applications serve HTTP).
	SpringProtocolKey = "protocol"
)

// Protocols of a Spring instance's ports: its port's when the metadata
// declares none, and its sslPort's.
const (
	springDefaultProtocol = "http"
	springSSLProtocol     = "https"
)

// curatorInstance is a Curator x-discovery ServiceInstance as Spring Cloud
// Zookeeper serializes it (Jackson): name, id, address, port, sslPort,
// payload (a ZookeeperInstance: id, name, metadata), registrationTimeUTC,
// serviceType, uriSpec and, since Curator 5, enabled. Ports are pointers:
// Curator writes null for a port it does not have.
type curatorInstance struct {
	Name    string  `json:"name"`
	ID      string  `json:"id"`
	Address string  `json:"address"`
	Port    *int64  `json:"port"`
	SSLPort *int64  `json:"sslPort"`
	Enabled *bool   `json:"enabled"`
	Payload payload `json:"payload"`
}

// payload is the ServiceInstance's payload: Spring's ZookeeperInstance
// carries the metadata; any other payload (a string, another class) has
// none.
type payload struct {
	Metadata map[string]string
}

// UnmarshalJSON reads the metadata of an object payload: string values as
// they are, any other value as its JSON text (Spring writes strings only),
// null left out; a payload that is not an object has no metadata.
func (p *payload) UnmarshalJSON(data []byte) error {
	var obj struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
	}
	if d := bytes.TrimSpace(data); len(d) == 0 || d[0] != '{' {
		return nil
	}
	if err := json.Unmarshal(data, &obj); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if len(obj.Metadata) == 0 {
		return nil
	}
	p.Metadata = make(map[string]string, len(obj.Metadata))
	for k, raw := range obj.Metadata {
		var s string
		switch t := string(bytes.TrimSpace(raw)); {
		case t == "null":
		case json.Unmarshal(raw, &s) == nil:
			p.Metadata[k] = s
		default:
			p.Metadata[k] = t
		}
	}
	return nil
}

// springResult is one instance node of layout spring-cloud as read: the
// instance to serve, or why it is not served (skip: its status, or
// disabled). A node that cannot be read as an instance is served as
// registries.InvalidInstance, which translate rejects as malformed,
// logging and counting it.
type springResult struct {
	inst registries.Instance
	skip string
}

// springInstanceID is the ID of the instance at /<root>/<app>/<child>:
// "<app>/<child>", the child being Curator's instance id (a UUID for
// Spring), unique within the registry and stable while the node lives.
func springInstanceID(app, child string) string { return app + "/" + child }

// springInstance converts the ServiceInstance JSON of node child of
// application app (spring.go's rules, doc.go): an instance, an Invalid one
// when the node is not a usable ServiceInstance, or a skip reason when its
// status or enabled flag says it is not to be served.
func springInstance(app, child string, data []byte) springResult {
	id := springInstanceID(app, child)
	invalid := func(format string, args ...any) springResult {
		return springResult{inst: registries.InvalidInstance(id, fmt.Sprintf(format, args...))}
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return invalid("empty node: not a Curator ServiceInstance")
	}
	var ci curatorInstance
	if err := json.Unmarshal(data, &ci); err != nil {
		return invalid("ServiceInstance JSON: %v", err)
	}
	switch {
	case ci.Name != "" && ci.Name != app:
		return invalid("ServiceInstance name %q is not its application %q", ci.Name, app)
	case strings.TrimSpace(ci.Address) == "":
		return invalid("ServiceInstance has no address")
	case ci.Port == nil && ci.SSLPort == nil:
		return invalid("ServiceInstance has neither port nor sslPort")
	}
	for _, p := range []*int64{ci.Port, ci.SSLPort} {
		if p != nil && (*p < 1 || *p > 65535) {
			return invalid("ServiceInstance port %d is not in 1-65535", *p)
		}
	}
	meta := ci.Payload.Metadata
	if st, ok := meta[SpringStatusKey]; ok && !strings.EqualFold(st, SpringStatusUp) {
		return springResult{skip: fmt.Sprintf("%s is %s", SpringStatusKey, st)}
	}
	if ci.Enabled != nil && !*ci.Enabled {
		return springResult{skip: "enabled is false"}
	}
	inst := registries.Instance{
		ID:       id,
		Address:  strings.TrimSpace(ci.Address),
		Locality: registries.MetadataLocality(meta),
	}
	if len(meta) > 0 {
		inst.Labels = maps.Clone(meta)
	}
	proto := meta[SpringProtocolKey]
	if proto == "" {
		proto = springDefaultProtocol
	}
	// One port per instance, as for Eureka's securePort
	// (registries/eureka servedPort): port, else sslPort as https.
	if ci.Port == nil {
		inst.Port, inst.Protocol = uint32(*ci.SSLPort), springSSLProtocol
	} else {
		inst.Port, inst.Protocol = uint32(*ci.Port), proto
	}
	return springResult{inst: inst}
}

// springService is application app's service from its instance nodes'
// results, by child name: every instance served (Invalid ones included,
// for translate to reject).
func springService(app string, nodes map[string]springResult) registries.Service {
	svc := registries.Service{Name: app}
	for _, child := range slices.Sorted(maps.Keys(nodes)) {
		if r := nodes[child]; r.skip == "" {
			svc.Instances = append(svc.Instances, r.inst)
		}
	}
	return svc
}
