package consul

import (
	"errors"
	"log/slog"
	"os"

	"github.com/meshbridge/meshbridge/registries"
)

// HostTemplate is the Consul registry's default host template: Consul's own
// DNS name, <service>.service.consul, or <service>.service.<dc>.consul for a
// remote datacenter (Service.Datacenter is set only for one).
const HostTemplate = "{{.Service}}.service.{{with .Datacenter}}{{.}}.{{end}}consul"

// Type is the registry type "consul" (registries.Types).
func Type() registries.Type {
	return registries.Type{
		Name:         "consul",
		HostTemplate: HostTemplate,
		ErrorReasons: []string{reasonCatalog, reasonHealth, reasonState, reasonUnavailable, reasonForbidden, reasonTLS, registries.ReasonHung},
		NewConfig:    func() registries.Config { return &Block{} },
	}
}

// Block is the consul block of a registry's configuration; its keys are the
// README's ("Configuration"). Fields left out take Config's defaults and
// environment fallbacks.
type Block struct {
	Address    string    `json:"address,omitempty"`
	Datacenter string    `json:"datacenter,omitempty"`
	Token      string    `json:"token,omitempty"`
	TokenFile  string    `json:"tokenFile,omitempty"`
	TLS        TLSConfig `json:"tls"`
	// HealthyOnly defaults to true.
	HealthyOnly *bool    `json:"healthyOnly,omitempty"`
	Services    []string `json:"services,omitempty"`
	MaxWatches  int      `json:"maxWatches,omitempty"`
}

var _ registries.Config = (*Block)(nil)

// Default implements registries.Config.
func (b *Block) Default() {
	if b.HealthyOnly == nil {
		t := true
		b.HealthyOnly = &t
	}
	if b.MaxWatches == 0 {
		b.MaxWatches = DefaultMaxWatches
	}
}

// config is the Config the block describes, for registry name.
func (b *Block) config(name string, log *slog.Logger) Config {
	return Config{
		Name: name, Address: b.Address, Datacenter: b.Datacenter, Token: b.Token, TokenFile: b.TokenFile,
		TLS: b.TLS, HealthyOnly: b.HealthyOnly == nil || *b.HealthyOnly, Services: b.Services,
		MaxWatches: b.MaxWatches, Logger: log,
	}
}

// Validate implements registries.Config with New's own rules, environment
// fallbacks included, so that a configuration that loads is one New accepts.
// The files themselves are checked through Files when the configuration
// loads, and read by New.
func (b *Block) Validate() []error {
	cfg := b.config("consul", nil).withDefaults(os.Getenv)
	_, epErr := resolveEndpoint(cfg, os.Getenv)
	return flatten(errors.Join(cfg.validate(), epErr))
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

// Files implements registries.Config: the token file and TLS files must be
// readable when the configuration loads.
func (b *Block) Files() []registries.File {
	return []registries.File{
		{Key: "tokenFile", Path: &b.TokenFile, MustExist: true},
		{Key: "tls.caFile", Path: &b.TLS.CAFile, MustExist: true, PEM: true},
		{Key: "tls.certFile", Path: &b.TLS.CertFile, MustExist: true, PEM: true},
		{Key: "tls.keyFile", Path: &b.TLS.KeyFile, MustExist: true, PEM: true},
	}
}

// Redacted implements registries.Config: the token is replaced.
func (b *Block) Redacted() registries.Config {
	c := *b
	if c.Token != "" {
		c.Token = registries.Redacted
	}
	return &c
}

// New implements registries.Config.
func (b *Block) New(name string, log *slog.Logger) (registries.Registry, error) {
	return New(b.config(name, log))
}
