package harness

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"go.yaml.in/yaml/v3"
)

// This file holds what starting Polaris needs outside a test (it takes no
// testing.TB): picking its ports and writing its config. StartPolaris uses
// it; so does examples/demo (make demo-nacos), which starts Polaris with
//
//	polaris start -c <WritePolarisConfig's path>
//
// in the directory the config was written to.

// FindPolarisPorts picks free ports on 127.0.0.1 for a Polaris server, with
// NacosHTTP chosen so that NacosHTTP + 1000 (the Nacos gRPC port) is free
// too. Each port was free a moment ago; another process may take one before
// Polaris binds it.
func FindPolarisPorts() (PolarisPorts, error) {
	pp := newPortPicker()
	defer pp.close()
	var free [5]int
	for i := range free {
		p, err := pp.pick()
		if err != nil {
			return PolarisPorts{}, err
		}
		free[i] = p
	}
	nacos, err := pp.pick(nacosGRPCOffset)
	if err != nil {
		return PolarisPorts{}, err
	}
	return PolarisPorts{
		Eureka: free[0], HTTP: free[1], ServiceGRPC: free[2], ConfigGRPC: free[3], XDS: free[4], NacosHTTP: nacos,
	}, nil
}

// WritePolarisConfig writes a Polaris server's config into dir and returns
// its path (dir/polaris-server.yaml). It is template (Polaris's
// polaris-server.yaml, which tools/build.sh puts next to the binary) with
// every TCP listener on 127.0.0.1 and its port from ports; the store at
// dir/polaris.bolt; register batching off (with it on, a register right after
// a client connects can be refused as a duplicate); health checks and the
// server's registration of itself (polaris.checker, which only health checks
// use) off; the server's own address 127.0.0.1 and the CMDB URL empty, so
// that nothing in the config connects out of the machine. Then each edit
// changes the decoded config (maps: "naming" → "batch" → ...) in order.
// Polaris, started in dir, writes its logs to dir/log/.
func WritePolarisConfig(template, dir string, ports PolarisPorts, edits ...func(cfg map[string]any)) (string, error) {
	raw, err := os.ReadFile(template)
	if err != nil {
		return "", fmt.Errorf("read polaris config template: %w", err)
	}
	cfg, err := polarisConfig(raw, ports, filepath.Join(dir, polarisStore))
	if err != nil {
		return "", fmt.Errorf("polaris config from %s: %w", template, err)
	}
	for _, edit := range edits {
		edit(cfg)
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		return "", fmt.Errorf("encode polaris config: %w", err)
	}
	path := filepath.Join(dir, polarisConfigFile)
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return "", fmt.Errorf("write polaris config: %w", err)
	}
	return path, nil
}

// polarisConfig is Polaris's config template with every listener on
// 127.0.0.1 and its port from ports, the store at storePath, register
// batching, health checks and self-registration off, and the server's own
// address 127.0.0.1.
func polarisConfig(template []byte, ports PolarisPorts, storePath string) (map[string]any, error) {
	var cfg map[string]any
	if err := yaml.Unmarshal(template, &cfg); err != nil {
		return nil, err
	}
	listenPorts := map[string]int{
		"service-eureka": ports.Eureka, "api-http": ports.HTTP, "service-grpc": ports.ServiceGRPC,
		"config-grpc": ports.ConfigGRPC, "xds-v3": ports.XDS, "service-nacos": ports.NacosHTTP,
	}
	servers, ok := cfg["apiservers"].([]any)
	if !ok {
		return nil, errors.New("no apiservers list")
	}
	seen := map[string]bool{}
	for _, s := range servers {
		server, _ := s.(map[string]any)
		name, _ := server["name"].(string)
		port, known := listenPorts[name]
		if !known {
			return nil, fmt.Errorf("apiserver %q is not one of %v: give it a free port on 127.0.0.1 here", name, polarisListeners)
		}
		option, ok := server["option"].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("apiserver %q has no option map", name)
		}
		option["listenIP"] = "127.0.0.1"
		option["listenPort"] = port
		seen[name] = true
	}
	for _, name := range polarisListeners {
		if !seen[name] {
			return nil, fmt.Errorf("apiserver %q missing from the template", name)
		}
	}
	set := func(value any, path ...string) error {
		m := cfg
		for _, k := range path[:len(path)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				return fmt.Errorf("no map at %s", strings.Join(path, "."))
			}
			m = next
		}
		m[path[len(path)-1]] = value
		return nil
	}
	for _, e := range []struct {
		value any
		path  []string
	}{
		{"127.0.0.1", []string{"bootstrap", "polaris_service", "self_address"}},
		{false, []string{"bootstrap", "polaris_service", "enable_register"}},
		{false, []string{"naming", "batch", "register", "open"}},
		{false, []string{"healthcheck", "open"}},
		{storePath, []string{"store", "option", "path"}},
		// The CMDB plugin fetches from this URL when one is set.
		{"", []string{"plugin", "cmdb", "option", "url"}},
	} {
		if err := set(e.value, e.path...); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
