package main

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/meshbridge/meshbridge/registries"
	"github.com/meshbridge/meshbridge/registries/consul"
	"github.com/meshbridge/meshbridge/registries/nacos"
	"github.com/meshbridge/meshbridge/registries/zookeeper"
)

// FuzzParseConfig parses arbitrary bytes as a configuration. It checks
// that ParseConfig never panics and that a configuration it accepts
// renders as JSON (RegistryConfig.MarshalJSON), whose parse gives the
// same configuration again; and that Redacted renders too, replaces every
// secret set with "<redacted>" and leaves the configuration unchanged.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("registries:\n- name: dc1\n  type: consul\n  consul: {address: 127.0.0.1:8500, token: s3cr3t}\n"))
	f.Add([]byte("registries:\n- {name: a, type: file, file: {path: services.yaml}, hostTemplate: \"{{.Service}}.file\", servicePort: 8080, resolution: DNS}\n" +
		"output: {namespace: mesh, endpoints: inline, revision: canary, allowLabels: [topology.istio.io/network]}\n" +
		"debounce: {after: 0s, max: 1s, eds: false}\nsync: {timeout: 1m}\n"))
	f.Add([]byte("registries:\n- name: zk\n  type: zookeeper\n  zookeeper:\n    servers: [127.0.0.1:2181]\n" +
		"    auth: {scheme: digest, credentials: \"user:pass\"}\n    dubbo: {mode: interface, dropParams: [pid], interfaceHostTemplate: \"{{.Interface}}.dubbo\"}\n"))
	f.Add([]byte("registries:\n- name: nc\n  type: nacos\n  nacos: {addresses: [127.0.0.1:8848], username: u, password: p, accessKey: ak, secretKey: sk}\n" +
		"mcp: {enabled: true, address: 0.0.0.0:15016, tls: {certFile: c.pem, keyFile: k.pem}}\n" +
		"kubernetes: {enabled: true, qps: 0.5, burst: 1, leaderElection: {enabled: false, leaseDuration: 20s}}\n"))
	f.Add([]byte("registries:\n- {name: a, type: file, file: {path: x}}\n---\n"))
	f.Add([]byte("registries: [{name: a, type: file, file: {path: x}, name: b}]\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			return
		}
		js, err := json.Marshal(cfg)
		if err != nil {
			t.Fatalf("an accepted configuration does not render as JSON: %v", err)
		}
		again, err := ParseConfig(js)
		if err != nil {
			t.Fatalf("the JSON of an accepted configuration does not parse: %v\n%s", err, js)
		}
		if js2, err := json.Marshal(again); err != nil || !bytes.Equal(js, js2) {
			t.Fatalf("a configuration's JSON parses into another configuration (%v):\n%s\nthen\n%s", err, js, js2)
		}
		red := cfg.Redacted()
		if _, err := json.Marshal(red); err != nil {
			t.Fatalf("the redacted configuration does not render as JSON: %v", err)
		}
		if after, err := json.Marshal(cfg); err != nil || !bytes.Equal(js, after) {
			t.Fatalf("Redacted changed the configuration (%v):\n%s\nthen\n%s", err, js, after)
		}
		for i, r := range cfg.Registries {
			for _, s := range secrets(r.Block, red.Registries[i].Block) {
				if s[0] != "" && s[1] != registries.Redacted {
					t.Fatalf("registries[%d]: Redacted kept a secret: %q", i, s[1])
				}
			}
		}
	})
}

// secrets pairs each secret value of a registry block with the value in its
// redacted copy.
func secrets(block, redacted registries.Config) [][2]string {
	switch b := block.(type) {
	case *consul.Block:
		return [][2]string{{b.Token, redacted.(*consul.Block).Token}}
	case *nacos.Block:
		r := redacted.(*nacos.Block)
		return [][2]string{{b.Password, r.Password}, {b.SecretKey, r.SecretKey}}
	case *zookeeper.Block:
		return [][2]string{{b.Auth.Credentials, redacted.(*zookeeper.Block).Auth.Credentials}}
	}
	return nil
}
