package file

import (
	"log/slog"

	"k8s.io/apimachinery/pkg/api/resource"

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
	// MaxSize is the largest file read, in bytes, as a Kubernetes quantity
	// (32Mi, the default; 100M; 1048576): a larger file is a read error
	// naming both sizes, and the last good listing stays.
	MaxSize *resource.Quantity `json:"maxSize,omitempty"`
}

var _ registries.Config = (*Block)(nil)

// Default implements registries.Config.
func (b *Block) Default() {
	if b.MaxSize == nil {
		b.MaxSize = resource.NewQuantity(DefaultMaxSize, resource.BinarySI)
	}
}

// Validate implements registries.Config.
func (b *Block) Validate() []error {
	var errs []error
	if b.Path == "" {
		errs = append(errs, registries.Invalid("path", "required"))
	}
	if _, err := b.maxSize(); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// maxSize is MaxSize in bytes (DefaultMaxSize when unset).
func (b *Block) maxSize() (int64, error) {
	if b.MaxSize == nil {
		return DefaultMaxSize, nil
	}
	if b.MaxSize.Sign() <= 0 {
		return 0, registries.Invalid("maxSize", "%s is not a positive size in bytes", b.MaxSize)
	}
	return b.MaxSize.Value(), nil
}

// Files implements registries.Config.
func (b *Block) Files() []registries.File {
	return []registries.File{{Key: "path", Path: &b.Path}}
}

// Redacted implements registries.Config; the block holds no secret.
func (b *Block) Redacted() registries.Config {
	c := *b
	if b.MaxSize != nil {
		q := b.MaxSize.DeepCopy()
		c.MaxSize = &q
	}
	return &c
}

// New implements registries.Config.
func (b *Block) New(name string, log *slog.Logger) (registries.Registry, error) {
	size, err := b.maxSize()
	if err != nil {
		return nil, err
	}
	return New(Config{Name: name, Path: b.Path, MaxSize: size, Logger: log})
}
