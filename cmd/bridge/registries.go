package main

import (
	"cmp"
	"fmt"
	"log/slog"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/pipeline"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/eureka"
	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/registries/nacos"
	"github.com/meshbridge/meshbridge/registries/zookeeper"
	"github.com/meshbridge/meshbridge/syncer"
	"github.com/meshbridge/meshbridge/translate"
)

// registryTypes are the registry types the configuration accepts, each
// defined in its own package (configuration block, defaults, validation,
// default host template, constructor). Adding a type is one line here.
var registryTypes = registries.Types{consul.Type(), eureka.Type(), file.Type(), nacos.Type(), zookeeper.Type()}

// buildRegistries creates the configured registry watchers and the Syncer's
// view of them (with their translators), in configuration order.
func buildRegistries(cfg *Config, log *slog.Logger) ([]pipeline.Registry, error) {
	var regs []pipeline.Registry
	for i := range cfg.Registries {
		reg, err := buildRegistry(cfg, i, log)
		if err != nil {
			return nil, err
		}
		regs = append(regs, reg)
	}
	return regs, nil
}

// buildRegistry creates registries[i]'s watcher and the Syncer's view of it;
// errors name the key.
func buildRegistry(cfg *Config, i int, log *slog.Logger) (pipeline.Registry, error) {
	rc := cfg.Registries[i]
	t, ok := registryTypes.Lookup(rc.Type)
	if !ok || rc.Block == nil {
		return pipeline.Registry{}, fmt.Errorf("config: registries[%d].type: %q is not one of %s", i, rc.Type, registryTypes.Names())
	}
	opts := translate.Options{
		Registry:     rc.Name,
		Namespace:    cfg.Output.Namespace,
		HostTemplate: cmp.Or(rc.HostTemplate, t.HostTemplate),
		ServicePort:  rc.ServicePort,
		Resolution:   model.Resolution(rc.Resolution),
		Endpoints:    translate.EndpointMode(cfg.Output.Endpoints),
		Revision:     cfg.Output.Revision,
		AllowLabels:  cfg.Output.AllowLabels,
		Instance:     cfg.Output.Instance,
	}
	tr, err := translate.New(opts)
	if err != nil {
		// Validate reported the keys at fault; this is its backstop.
		return pipeline.Registry{}, fmt.Errorf("config: registries[%d]: %w", i, err)
	}
	reg, err := rc.Block.New(rc.Name, log)
	if err != nil {
		return pipeline.Registry{}, fmt.Errorf("config: registries[%d]: %w", i, err)
	}
	registries.InitMetrics(rc.Name, t.ErrorReasons)
	return pipeline.Registry{Watcher: reg, Sync: syncer.Registry{Name: rc.Name, Type: rc.Type, Translator: tr,
		Policy: rc.Outage.over(cfg.Outage.over(syncer.OutagePolicy{}))}}, nil
}
