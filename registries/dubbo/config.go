package dubbo

import (
	"fmt"
	"slices"
	"strings"
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
	// the labels, besides the volatile ones (doc.go rule 5). Exact keys,
	// case-sensitive.
	DropParams []string `json:"dropParams,omitempty"`
	// InterfaceHostTemplate and ApplicationHostTemplate are the host
	// templates of interface-level and application-level services; ""
	// selects translate's defaults, "{{.Interface}}{{with .Group}}.{{.}}{{end}}{{with .Version}}.{{.}}{{end}}.dubbo"
	// and "{{.Application}}.dubbo". Fields: .Interface, .Group, .Version
	// (with "." replaced by "-"), .Application, .Namespace.
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
		errs = append(errs, fmt.Errorf("mode: %q is not one of interface, application, both", c.Mode))
	}
	for i, p := range c.DropParams {
		if strings.TrimSpace(p) == "" {
			errs = append(errs, fmt.Errorf("dropParams[%d]: empty", i))
		}
	}
	return errs
}

// volatileParams are left out of labels whatever the configuration (doc.go
// rule 5): they change with every restart of the provider (pid, timestamp,
// release, dubbo.metadata.revision, dubbo.subscribed-services.revision),
// are kept elsewhere (methods), are implementation details (bean.name,
// service.filter), hold JSON (dubbo.endpoints,
// dubbo.metadata-service.url-params) or a secret (token: Dubbo's token
// authentication).
var volatileParams = []string{
	"pid", "timestamp", "release", "methods", "bean.name", "service.filter", "token",
	MetaRevision, MetaEndpoints, "dubbo.metadata-service.url-params", "dubbo.subscribed-services.revision",
}

// dropSet returns the keys left out of labels: volatileParams and
// c.DropParams.
func (c Config) dropSet() map[string]bool {
	out := make(map[string]bool, len(volatileParams)+len(c.DropParams))
	for _, k := range slices.Concat(volatileParams, c.DropParams) {
		out[k] = true
	}
	return out
}
