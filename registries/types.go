package registries

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
)

// Type is one kind of registry ("consul", "file", ...): the configuration
// block it reads, its default host template and how to build it. A registry
// package exports one; the command lists them in one Types table, and
// nothing else outside the package names the type.
type Type struct {
	// Name is the value of a registry's `type` key and the key of its
	// configuration block (registries[i].<Name>).
	Name string
	// HostTemplate is the default host template: a text/template over
	// .Service, .Datacenter, .Namespace and .Group (docs/design.md §3), used when
	// the registry sets no hostTemplate.
	HostTemplate string
	// HostsFrom, when set, says what names the type's hosts instead of a
	// host template ("zookeeper.dubbo.interfaceHostTemplate and
	// applicationHostTemplate"; the file registry's services carry theirs):
	// a registry's hostTemplate would be ignored, so it is refused, with
	// this in the error.
	HostsFrom string
	// ErrorReasons are the reasons its watcher passes to its Session
	// (ReadFailed), the values of meshbridge_registry_errors_total's reason label: each
	// series is created at 0 when a registry of the type is built
	// (InitMetrics), so that the first failure shows in increase() and
	// rate().
	ErrorReasons []string
	// NewConfig returns an empty configuration block, ready to be decoded
	// from YAML; its json tags are the block's keys.
	NewConfig func() Config
}

// Config is a registry type's configuration block. Its methods are called in
// this order: decode, Default, Files (paths are resolved and checked),
// Validate, then New.
type Config interface {
	// Default fills the fields left out with their defaults.
	Default()
	// Validate reports every invalid field: a *FieldError for one key,
	// named relative to the block ("maxWatches: 500 is outside 1-190"), or
	// a plain error about several keys, reported at the block's path.
	Validate() []error
	// Files lists the paths the block names, for resolving relative paths
	// against the configuration file and checking them at load.
	Files() []File
	// Redacted returns a copy with every secret value replaced by
	// "<redacted>", for /debug/config.
	Redacted() Config
	// New builds the registry called name.
	New(name string, log *slog.Logger) (Registry, error)
}

// Redacted is the value that replaces a secret in Config.Redacted.
const Redacted = "<redacted>"

// File is a path in a configuration block.
type File struct {
	// Key is the field, relative to the block ("tls.caFile").
	Key string
	// Path points at the field's value; resolving a relative path rewrites it.
	Path *string
	// MustExist: a credential or certificate the registry needs to start,
	// checked when the configuration loads. A data file that may appear
	// later (the file registry's) is not.
	MustExist bool
	// PEM: the file must hold at least one PEM block.
	PEM bool
}

// Types is the table of registry types a command supports, in the order
// they are listed in messages.
type Types []Type

// Lookup returns the type called name.
func (ts Types) Lookup(name string) (Type, bool) {
	i := slices.IndexFunc(ts, func(t Type) bool { return t.Name == name })
	if i < 0 {
		return Type{}, false
	}
	return ts[i], true
}

// Names returns "consul, file, ..." for messages.
func (ts Types) Names() string {
	names := make([]string, len(ts))
	for i, t := range ts {
		names[i] = t.Name
	}
	return strings.Join(names, ", ")
}

// Check reports a table whose types have an empty or repeated name, or no
// NewConfig: a programming error the command's tests catch.
func (ts Types) Check() error {
	seen := map[string]bool{}
	for _, t := range ts {
		if t.Name == "" || t.NewConfig == nil || seen[t.Name] {
			return fmt.Errorf("registry type %q: empty or repeated name, or no NewConfig", t.Name)
		}
		seen[t.Name] = true
	}
	return nil
}
