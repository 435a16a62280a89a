package nacos

import (
	"log/slog"
	"os"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// HostTemplate is the Nacos registry's default host template:
// <service>.<group>.<namespace>.nacos. translate lower-cases the host and
// maps "_" to "-", so the default namespace ("public") and group
// (DEFAULT_GROUP) give <service>.default-group.public.nacos.
const HostTemplate = "{{.Service}}.{{.Group}}.{{.Namespace}}.nacos"

// Type is the registry type "nacos" (registries.Types).
func Type() registries.Type {
	return registries.Type{
		Name:         "nacos",
		HostTemplate: HostTemplate,
		ErrorReasons: []string{reasonConnect, reasonList, reasonRead, reasonLogin, reasonForbidden, registries.ReasonHung},
		NewConfig:    func() registries.Config { return &Block{} },
	}
}

// Block is the nacos block of a registry's configuration; its keys are the
// README's ("Configuration"). Fields left out take Config's defaults and
// environment fallbacks; a duration given keeps its value, and zero is
// refused (strict.Duration).
type Block struct {
	Addresses         []string        `json:"addresses,omitempty"`
	GRPCPort          int             `json:"grpcPort,omitempty"`
	ContextPath       string          `json:"contextPath,omitempty"`
	Namespaces        []string        `json:"namespaces,omitempty"`
	Groups            []string        `json:"groups,omitempty"`
	Clusters          []string        `json:"clusters,omitempty"`
	Services          []string        `json:"services,omitempty"`
	Username          string          `json:"username,omitempty"`
	Password          string          `json:"password,omitempty"`
	PasswordFile      string          `json:"passwordFile,omitempty"`
	AccessKey         string          `json:"accessKey,omitempty"`
	SecretKey         string          `json:"secretKey,omitempty"`
	SecretKeyFile     string          `json:"secretKeyFile,omitempty"`
	TLS               TLSConfig       `json:"tls"`
	RelistInterval    strict.Duration `json:"relistInterval"`
	ReconcileInterval strict.Duration `json:"reconcileInterval"`
	CacheDir          string          `json:"cacheDir,omitempty"`
	Dubbo             dubbo.Config    `json:"dubbo"`
}

var _ registries.Config = (*Block)(nil)

// Default implements registries.Config.
func (b *Block) Default() {
	b.RelistInterval.Default(DefaultRelistInterval)
	b.ReconcileInterval.Default(DefaultReconcileInterval)
	b.Dubbo.Default()
}

// config is the Config the block describes, for registry name.
func (b *Block) config(name string, log *slog.Logger) Config {
	return Config{
		Name: name, Addresses: b.Addresses, GRPCPort: b.GRPCPort, ContextPath: b.ContextPath,
		Namespaces: b.Namespaces, Groups: b.Groups, Clusters: b.Clusters, Services: b.Services,
		Username: b.Username, Password: b.Password, PasswordFile: b.PasswordFile,
		AccessKey: b.AccessKey, SecretKey: b.SecretKey, SecretKeyFile: b.SecretKeyFile,
		TLS: b.TLS, RelistInterval: b.RelistInterval.Duration, ReconcileInterval: b.ReconcileInterval.Duration,
		CacheDir: b.CacheDir, Dubbo: b.Dubbo, Logger: log,
		// A duration the block gave as zero stays zero so that validate
		// refuses it; Default already filled the absent ones.
		explicitDurations: true,
	}
}

// Validate implements registries.Config with New's own rules, environment
// fallbacks included, so that a configuration that loads is one New accepts.
// The files are checked through Files when the configuration loads, and
// read by New.
func (b *Block) Validate() []error {
	return flatten(b.config("nacos", nil).withDefaults(os.Getenv).validate())
}

// flatten splits an errors.Join into its errors.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out []error
		for _, e := range j.Unwrap() {
			out = append(out, flatten(e)...)
		}
		return out
	}
	return []error{err}
}

// Files implements registries.Config: the secret files and TLS files must be
// readable when the configuration loads; cacheDir is resolved against the
// configuration file's directory like them, and may not exist yet.
func (b *Block) Files() []registries.File {
	return []registries.File{
		{Key: "passwordFile", Path: &b.PasswordFile, MustExist: true},
		{Key: "secretKeyFile", Path: &b.SecretKeyFile, MustExist: true},
		{Key: "tls.caFile", Path: &b.TLS.CAFile, MustExist: true, PEM: true},
		{Key: "tls.certFile", Path: &b.TLS.CertFile, MustExist: true, PEM: true},
		{Key: "tls.keyFile", Path: &b.TLS.KeyFile, MustExist: true, PEM: true},
		{Key: "cacheDir", Path: &b.CacheDir},
	}
}

// Redacted implements registries.Config: the password and the secret key
// are replaced. The username and access key identify, they do not
// authenticate, and stay.
func (b *Block) Redacted() registries.Config {
	c := *b
	if c.Password != "" {
		c.Password = registries.Redacted
	}
	if c.SecretKey != "" {
		c.SecretKey = registries.Redacted
	}
	return &c
}

// New implements registries.Config.
func (b *Block) New(name string, log *slog.Logger) (registries.Registry, error) {
	return New(b.config(name, log))
}
