package dubbo

import (
	"cmp"
	"strings"

	"github.com/meshbridge/meshbridge/registries"
)

// Default host templates (doc.go rule 4): <interface>[.<group>][.<version>].dubbo
// ("com.foo.demoservice.g1.1-0-0.dubbo" once package translate lower-cased
// it) and <application>.dubbo.
const (
	DefaultInterfaceHostTemplate   = "{{.Interface}}{{with .Group}}.{{.}}{{end}}{{with .Version}}.{{.}}{{end}}.dubbo"
	DefaultApplicationHostTemplate = "{{.Application}}.dubbo"
)

// Identity identifies a Dubbo service: interface-level when Interface is
// set (one per interface, group and version), else Dubbo 3
// application-level (one per application).
type Identity struct {
	// Interface is the Java interface ("com.foo.DemoService") of an
	// interface-level service; "" for an application-level one.
	Interface string
	// Group and Version are the Dubbo group and version of an
	// interface-level service, as registered ("1.0.0"); either may be "".
	Group   string
	Version string
	// Application is the Dubbo application: the service's own name when
	// application-level, the application param of the first provider (by
	// instance ID) when interface-level.
	Application string
}

// hostData is what a Dubbo host template sees (Config.InterfaceHostTemplate
// and ApplicationHostTemplate).
type hostData struct {
	Interface, Group, Application, Namespace string
	// Version has "." replaced by "-", so that 1.0.0 is one DNS label.
	Version string
}

// hostSample is the data a template is checked against when parsed.
var hostSample = hostData{Interface: "com.foo.Svc", Group: "group", Version: "1-0", Application: "app", Namespace: "ns"}

// naming is a Config's compiled host templates.
type naming struct{ iface, app *registries.HostTemplate }

// parseNaming compiles c's host templates (the defaults for ""); each error
// names its field, relative to the dubbo block (registries.FieldError:
// "interfaceHostTemplate", "applicationHostTemplate").
func (c Config) parseNaming() (naming, []error) {
	var n naming
	var errs []error
	var err error
	if n.iface, err = registries.ParseHostTemplate(cmp.Or(c.InterfaceHostTemplate, DefaultInterfaceHostTemplate), hostSample); err != nil {
		errs = append(errs, &registries.FieldError{Field: "interfaceHostTemplate", Err: err})
	}
	if n.app, err = registries.ParseHostTemplate(cmp.Or(c.ApplicationHostTemplate, DefaultApplicationHostTemplate), hostSample); err != nil {
		errs = append(errs, &registries.FieldError{Field: "applicationHostTemplate", Err: err})
	}
	return n, errs
}

// Named returns the registries.Service of the Dubbo service id called
// name in namespace (the Nacos namespace; "" in ZooKeeper), with instances:
// its Host named by the template of its level (interface-level when
// id.Interface is set), or HostError when the template fails on its data,
// and a port per protocol (doc.go rule 4). namespace is the Service's
// Namespace.
func (b *Builder) Named(id Identity, name, namespace string, instances []registries.Instance) registries.Service {
	svc := registries.Service{Name: name, Namespace: namespace, PortPerProtocol: true, Instances: instances}
	tmpl := b.naming.app
	if id.Interface != "" {
		tmpl = b.naming.iface
	}
	host, err := tmpl.Execute(hostData{Interface: id.Interface, Group: id.Group, Application: id.Application,
		Namespace: namespace, Version: strings.ReplaceAll(id.Version, ".", "-")})
	if err != nil {
		svc.HostError = "Dubbo host template: " + err.Error()
		return svc
	}
	svc.Host = host
	return svc
}
