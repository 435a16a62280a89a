// Package dubbotest helps the tests of the registries that hold Dubbo
// services (nacos, zookeeper) state a Dubbo service's identity: with
// IdentityTemplates its host spells every field of it, and IdentityHost is
// the host a test expects. Like net/http/httptest it is a normal package
// that only tests import.
package dubbotest

import (
	"strings"

	"github.com/meshbridge/meshbridge/registries/dubbo"
)

// IdentityTemplates returns c with host templates that write every field
// of a service's dubbo.Identity and its namespace, "|"-separated (not a
// valid mesh host: for the tests of what a registry emits).
func IdentityTemplates(c dubbo.Config) dubbo.Config {
	c.InterfaceHostTemplate = "{{.Interface}}|{{.Group}}|{{.Version}}|{{.Application}}|{{.Namespace}}"
	c.ApplicationHostTemplate = "app|{{.Application}}|{{.Namespace}}"
	return c
}

// IdentityHost is the host IdentityTemplates name the service id of
// namespace by: the templates see the version with "." replaced by "-"
// (package dubbo rule 10).
func IdentityHost(id dubbo.Identity, namespace string) string {
	if id.Interface == "" {
		return "app|" + id.Application + "|" + namespace
	}
	return id.Interface + "|" + id.Group + "|" + strings.ReplaceAll(id.Version, ".", "-") + "|" + id.Application + "|" + namespace
}
