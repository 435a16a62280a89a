package dubbo

import (
	"fmt"
	"slices"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// Mode selects which Dubbo services a registry emits (doc.go rule 8).
type Mode string

const (
	// ModeInterface emits interface-level services only.
	ModeInterface Mode = "interface"
	// ModeApplication emits Dubbo 3 application-level services only.
	ModeApplication Mode = "application"
	// ModeBoth emits both; the default.
	ModeBoth Mode = "both"
)

// Interface reports whether interface-level services are emitted.
func (m Mode) Interface() bool { return m == ModeInterface || m == ModeBoth || m == "" }

// Application reports whether application-level services are emitted.
func (m Mode) Application() bool { return m == ModeApplication || m == ModeBoth || m == "" }

// Config is the dubbo block of a registry that holds Dubbo providers
// (zookeeper.dubbo, nacos.dubbo); its keys are the README's.
type Config struct {
	// Enabled turns Dubbo handling on: nacos only, default false (Dubbo
	// services are then skipped and counted). A zookeeper registry reads
	// Dubbo only and refuses enabled: false.
	Enabled *bool `json:"enabled,omitempty"`
	// Mode is interface, application or both (default).
	Mode Mode `json:"mode,omitempty"`
	// DropParams are further URL parameters and metadata keys left out of
	// the labels, besides Dubbo's own (doc.go rule 5). Exact keys,
	// case-sensitive.
	DropParams []string `json:"dropParams,omitempty"`
	// InterfaceHostTemplate and ApplicationHostTemplate are the host
	// templates of interface-level and application-level services; ""
	// selects DefaultInterfaceHostTemplate and
	// DefaultApplicationHostTemplate. Fields: .Interface, .Group, .Version
	// (with "." replaced by "-"), .Application, .Namespace (the Nacos
	// namespace; "" in ZooKeeper).
	InterfaceHostTemplate   string `json:"interfaceHostTemplate,omitempty"`
	ApplicationHostTemplate string `json:"applicationHostTemplate,omitempty"`
}

// IsEnabled reports whether Enabled is set to true.
func (c Config) IsEnabled() bool { return c.Enabled != nil && *c.Enabled }

// Default fills Mode.
func (c *Config) Default() {
	if c.Mode == "" {
		c.Mode = ModeBoth
	}
}

// Validate reports every invalid field, each error naming the field relative
// to the dubbo block ("mode: ...").
func (c Config) Validate() []error {
	var errs []error
	switch c.Mode {
	case "", ModeInterface, ModeApplication, ModeBoth:
	default:
		errs = append(errs, registries.Invalid("mode", "%q is not one of interface, application, both", c.Mode))
	}
	for i, p := range c.DropParams {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, registries.Invalid(fmt.Sprintf("dropParams[%d]", i), "empty"))
		}
	}
	_, terrs := c.parseNaming()
	return append(errs, terrs...)
}

// frameworkParams are the URL parameters and instance metadata keys Dubbo
// itself writes (Apache Dubbo 3.3 Java and dubbo-go v3.3), left out of labels
// whatever the configuration (doc.go rule 5): none is what a user selects a
// subset of providers by. Some change with every restart or redeploy (pid,
// timestamp, release, revision, dubbo.metadata.revision, meta-v), some are
// kept elsewhere (methods, weight, protocol, interface and path: the host
// and ports), some hold JSON (dubbo.endpoints,
// dubbo.metadata-service.url-params) or a secret (token: Dubbo's token
// authentication); the rest are framework settings (serialization, cluster,
// loadbalance, retries, ...). What users select by stays: version, group,
// application, Dubbo's routing tag (dubbo.tag), and every parameter Dubbo
// does not define (a user's own, e.g. env or zone).
var frameworkParams = []string{
	// Both.
	"anyhost", "bean.name", "category", "check", "cluster", "deprecated", "dubbo", "dynamic", "enabled", "generic",
	"interface", "loadbalance", "methods", "path", "pid", "protocol", "register", "release", "retries",
	"revision", "serialization", "service.filter", "side", "timeout", "timestamp", "token", "weight",
	MetaRevision, MetaEndpoints, "dubbo.metadata-service.url-params", "dubbo.subscribed-services.revision",
	"dubbo.metadata.storage-type", "meta-v",
	// Dubbo Java.
	"logger", "metadata-type", "prefer.serialization", "service-name-mapping", "executor-management-mode",
	"file-cache", "background", "qos.enable", "qos.port", "qos.accept.foreign.ip", "register-mode",
	"application.version",
	// dubbo-go.
	"IDL-mode", "accesslog", "app.version", "application.tag", "auth", "config.tracing", "environment",
	"execute.limit", "execute.limit.rejected.handler", "export", "message_size", "module", "name", "organization",
	"owner", "param.sign", "registry", "registry.role", "registry.type", "warmup", "max-server-recv-msg-size",
	"max-server-send-msg-size", "tps.limit.interval", "tps.limit.rate",
	"tps.limit.rejected.handler", "tps.limit.strategy", "tps.limiter",
}

// dropSet returns the keys left out of labels: frameworkParams and
// c.DropParams.
func (c Config) dropSet() map[string]bool {
	out := make(map[string]bool, len(frameworkParams)+len(c.DropParams))
	for _, k := range slices.Concat(frameworkParams, c.DropParams) {
		out[k] = true
	}
	return out
}
