package file

import (
	"errors"
	"log/slog"

	"github.com/meshbridge/meshbridge/registries"
)

// HostTemplate is the file registry's default host template. The file
// registry writes each service's host as it is (Service.Host), so the
// template applies only to a service without one: its name.
const HostTemplate = "{{.Service}}"

// Type is the registry type "file" (registries.Types).
func Type() registries.Type {
	return registries.Type{
		Name:         "file",
		HostTemplate: HostTemplate,
		HostsFrom:    "the host of each service in its file (services[].host)",
		ErrorReasons: []string{"read", "parse"},
		NewConfig:    func() registries.Config { return &Block{} },
	}
}

// Block is the file block of a registry's configuration.
type Block struct {
	// Path is the YAML file of services (schema in the README); it may not
	// exist yet when the configuration loads: the registry waits for it.
	Path string `json:"path"`
}

var _ registries.Config = (*Block)(nil)

// Default implements registries.Config; the block has no defaults.
func (b *Block) Default() {}

// Validate implements registries.Config.
func (b *Block) Validate() []error {
	if b.Path == "" {
		return []error{errors.New("path: required")}
	}
	return nil
}

// Files implements registries.Config.
func (b *Block) Files() []registries.File {
	return []registries.File{{Key: "path", Path: &b.Path}}
}

// Redacted implements registries.Config; the block holds no secret.
func (b *Block) Redacted() registries.Config { c := *b; return &c }

// New implements registries.Config.
func (b *Block) New(name string, log *slog.Logger) (registries.Registry, error) {
	return New(Config{Name: name, Path: b.Path, Logger: log})
}
