package eureka

import (
	"errors"
	"log/slog"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/registries"
)

// HostTemplate is the Eureka registry's default host template:
// <application>.eureka; translate lower-cases it (Eureka upper-cases
// application names: ORDERS-SERVICE → orders-service.eureka).
const HostTemplate = "{{.Service}}.eureka"

// Type is the registry type "eureka" (registries.Types).
func Type() registries.Type {
	registries.PerRegistry(fetches, relists) // registries.Forget clears them
	return registries.Type{
		Name:         "eureka",
		HostTemplate: HostTemplate,
		ErrorReasons: []string{reasonUnavailable, reasonForbidden, reasonDecode, reasonTLS, registries.ReasonHung},
		NewConfig:    func() registries.Config { return &Block{} },
	}
}

// Block is the eureka block of a registry's configuration; its keys are the
// README's ("Configuration"). Durations left out take Config's defaults,
// reconnectGrace DefaultReconnectGrace; a duration given keeps its value
// (strict.Duration), zero included, and validation refuses what is out of
// range.
type Block struct {
	Servers        []string        `json:"servers,omitempty"`
	Username       string          `json:"username,omitempty"`
	PasswordFile   string          `json:"passwordFile,omitempty"`
	TLS            TLSConfig       `json:"tls"`
	Services       []string        `json:"services,omitempty"`
	Interval       strict.Duration `json:"interval"`
	RelistInterval strict.Duration `json:"relistInterval"`
	RequestTimeout strict.Duration `json:"requestTimeout"`
	ReconnectGrace strict.Duration `json:"reconnectGrace"`
}

var _ registries.Config = (*Block)(nil)

// Default implements registries.Config.
func (b *Block) Default() {
	b.Interval.Default(DefaultInterval)
	b.RelistInterval.Default(DefaultRelistInterval)
	b.RequestTimeout.Default(DefaultRequestTimeout)
	b.ReconnectGrace.Default(DefaultReconnectGrace)
}

// config is the Config the block describes, for registry name.
func (b *Block) config(name string, log *slog.Logger) Config {
	return Config{
		Name: name, Servers: b.Servers, Username: b.Username, PasswordFile: b.PasswordFile, TLS: b.TLS,
		Services: b.Services, Interval: b.Interval.Duration, RelistInterval: b.RelistInterval.Duration,
		RequestTimeout: b.RequestTimeout.Duration, ReconnectGrace: b.ReconnectGrace.Duration, Logger: log,
	}
}

// Validate implements registries.Config with New's own rules. A duration
// given as zero is refused by the range checks (withDefaults does not see
// it: Default filled only the absent ones).
func (b *Block) Validate() []error {
	c := b.config("eureka", nil)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if len(c.Servers) == 0 {
		c.Servers = []string{DefaultServer}
	}
	return flatten(c.validate())
}

// flatten splits an errors.Join into its errors.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	var j interface{ Unwrap() []error }
	if errors.As(err, &j) {
		return j.Unwrap()
	}
	return []error{err}
}

// Files implements registries.Config.
func (b *Block) Files() []registries.File {
	return []registries.File{
		{Key: "passwordFile", Path: &b.PasswordFile, MustExist: true},
		{Key: "tls.caFile", Path: &b.TLS.CAFile, MustExist: true, PEM: true},
	}
}

// Redacted implements registries.Config: the block holds no secret (the
// password is in a file); the username identifies and stays.
func (b *Block) Redacted() registries.Config {
	c := *b
	return &c
}

// New implements registries.Config.
func (b *Block) New(name string, log *slog.Logger) (registries.Registry, error) {
	return New(b.config(name, log))
}
