package main

import (
	"fmt"
	"log/slog"

	"github.com/meshbridge/meshbridge/model"
	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/file"
	"github.com/meshbridge/meshbridge/serviceentry"
	"github.com/meshbridge/meshbridge/translate"
)

// buildRegistries creates the configured registry watchers and the Syncer's
// view of them (with their translators), in configuration order.
func buildRegistries(cfg *Config, log *slog.Logger) ([]registries.Registry, []serviceentry.SyncRegistry, error) {
	var regs []registries.Registry
	var syncRegs []serviceentry.SyncRegistry
	for i, rc := range cfg.Registries {
		tr, err := translate.New(translate.Options{
			Registry:     rc.Name,
			Type:         rc.Type,
			Namespace:    cfg.Output.Namespace,
			HostTemplate: rc.HostTemplate,
			ServicePort:  rc.ServicePort,
			Resolution:   model.Resolution(rc.Resolution),
			Endpoints:    translate.EndpointMode(cfg.Output.Endpoints),
			Revision:     cfg.Output.Revision,
			AllowLabels:  cfg.Output.AllowLabels,
		})
		if err != nil {
			return nil, nil, fmt.Errorf("config: registries[%d]: %w", i, err)
		}
		reg, err := newRegistry(rc, log)
		if err != nil {
			return nil, nil, fmt.Errorf("config: registries[%d]: %w", i, err)
		}
		regs = append(regs, reg)
		syncRegs = append(syncRegs, serviceentry.SyncRegistry{Name: rc.Name, Type: rc.Type, Translator: tr})
	}
	return regs, syncRegs, nil
}

func newRegistry(rc RegistryConfig, log *slog.Logger) (registries.Registry, error) {
	switch rc.Type {
	case "consul":
		c := rc.Consul
		return consul.New(consul.Config{
			Name:       rc.Name,
			Address:    c.Address,
			Datacenter: c.Datacenter,
			Token:      c.Token,
			TokenFile:  c.TokenFile,
			TLS: consul.TLSConfig{
				CAFile:             c.TLS.CAFile,
				CertFile:           c.TLS.CertFile,
				KeyFile:            c.TLS.KeyFile,
				ServerName:         c.TLS.ServerName,
				InsecureSkipVerify: c.TLS.InsecureSkipVerify,
			},
			HealthyOnly: *c.HealthyOnly,
			Services:    c.Services,
			MaxWatches:  c.MaxWatches,
			Logger:      log,
		})
	case "file":
		return file.New(file.Config{Name: rc.Name, Path: rc.File.Path, Logger: log})
	}
	return nil, fmt.Errorf("type: %q is not one of consul, file", rc.Type)
}
