package model

import "time"

// Object is an object of the aggregate store: a *Config, or a WorkloadEntry
// held compactly (*WorkloadEntry). Objects are read-only once stored or
// handed out.
type Object interface {
	// Key is the object's (kind, namespace, name).
	Key() ConfigKey
	// ContentSum is the object's content hash (Meta.Hash); zero when it
	// carries none.
	ContentSum() Hash
	// Version is the store's resource version of the object
	// (Meta.ResourceVersion); 0 on an object never stored.
	Version() uint64
	// ObservedAt is the registry observation the write of the object came
	// from (Meta.Observed), nil when none.
	ObservedAt() *time.Time
	// AsConfig returns the object as a Config: the Config itself, or a
	// WorkloadEntry materialised, a new Config per call (read-only).
	AsConfig() *Config
	// Stamped returns a copy of the object carrying the store's resource
	// version and observation; the store calls it on every write.
	Stamped(version uint64, observed *time.Time) Object
}

var (
	_ Object = (*Config)(nil)
	_ Object = (*WorkloadEntry)(nil)
)

// ContentSum implements Object.
func (c *Config) ContentSum() Hash { return c.Hash }

// Version implements Object.
func (c *Config) Version() uint64 { return c.ResourceVersion }

// ObservedAt implements Object.
func (c *Config) ObservedAt() *time.Time { return c.Observed }

// AsConfig implements Object: c itself.
func (c *Config) AsConfig() *Config { return c }

// Stamped implements Object.
func (c *Config) Stamped(version uint64, observed *time.Time) Object {
	out := *c
	out.ResourceVersion, out.Observed = version, observed
	return &out
}

// AsConfigs returns objs as Configs (AsConfig), in order.
func AsConfigs[O Object](objs []O) []*Config {
	out := make([]*Config, len(objs))
	for i, o := range objs {
		out[i] = o.AsConfig()
	}
	return out
}
