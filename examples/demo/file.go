package main

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// fileRegistry is meshbridge's file registry: the demo edits its YAML file
// live, as an operator or a script would, writing each version to a
// temporary file renamed over the watched one (the README's advice: a
// rename is read whole). No server runs; the file is the registry.
type fileRegistry struct {
	path string
	// port is the service's declared port (backend-1's); instances maps
	// each registered instance to its port.
	port      int
	instances map[string]int
}

func (f *fileRegistry) name() string       { return "the file registry" }
func (f *fileRegistry) registered() string { return "in services.yaml" }
func (f *fileRegistry) host() string       { return "echo.demo.local" }

func (f *fileRegistry) config() string {
	return fmt.Sprintf(`- name: file-demo
  type: file
  file: {path: %s}
`, f.path)
}

func (f *fileRegistry) start(d *demo) error {
	f.path = filepath.Join(d.dir, "services.yaml")
	f.instances = map[string]int{}
	say("Writing the file registry's services.yaml (%s): no services yet", f.path)
	return f.write()
}

func (f *fileRegistry) register(id string, port int) error {
	if f.port == 0 {
		f.port = port
	}
	f.instances[id] = port
	return f.write()
}

func (f *fileRegistry) deregister(id string) error {
	delete(f.instances, id)
	return f.write()
}

// write writes the registry's state: the echo service on its declared
// port, with an instance per registered one on its own port (mapped
// through its WorkloadEntry when it differs), or `services: []` (an
// explicit empty list: an empty file keeps the last good state).
func (f *fileRegistry) write() error {
	var b strings.Builder
	if len(f.instances) == 0 {
		b.WriteString("services: []\n")
	} else {
		fmt.Fprintf(&b, "services:\n- host: %s\n  ports: [{number: %d, protocol: grpc}]\n  instances:\n", f.host(), f.port)
		for _, id := range slices.Sorted(maps.Keys(f.instances)) {
			fmt.Fprintf(&b, "  - {address: 127.0.0.1, port: %d, labels: {instance: %s}, locality: region-a/zone-a}\n", f.instances[id], id)
		}
	}
	tmp := f.path + ".tmp"
	if err := os.WriteFile(tmp, []byte(b.String()), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, f.path)
}
