// Package dubbo is meshbridge's model of Apache Dubbo service discovery, shared
// by the registries that hold Dubbo providers (zookeeper, nacos): it reads
// what Dubbo writes and turns it into registries.Service values, named here
// (rule 10): package translate sees services with a host and a port per
// protocol, and never names Dubbo.
//
// Dubbo registers a provider in one or both of two ways (Dubbo 3
// documentation, "Service discovery"):
//
//   - Interface-level: one provider URL per exported interface and
//     protocol, "dubbo://10.0.0.1:20880/com.foo.DemoService?application=app&
//     methods=a,b&side=provider&version=1.0.0&…". In ZooKeeper it is a child
//     of /<root>/<interface>/providers, URL-encoded once (so a comma inside
//     appears as %2C); in Nacos it is an instance of the service
//     "providers:<interface>:<version>:<group>" whose metadata are the URL's
//     parameters. ParseProviderURL and ProviderFromParams read them.
//   - Application-level (Dubbo 3): one instance per application process. In
//     ZooKeeper it is a Curator ServiceInstance JSON at
//     /services/<application>/<ip:port> (ParseServiceInstance); in Nacos, an
//     instance of the service named after the application. Its metadata
//     carry dubbo.endpoints (a JSON list of {port, protocol}: the process's
//     ports), dubbo.metadata.revision and dubbo.metadata.storage-type.
//
// The rules this package applies, and their sources:
//
//  1. A provider URL with side=consumer, or under a category other than
//     providers, is not a provider (ErrNotProvider), whatever else it holds
//     (Dubbo writes consumer, router and configurator URLs without a
//     port): it is ignored, not rejected. A URL that cannot be parsed, or has no host, no valid port or
//     no interface, is malformed: its instance is passed on with
//     registries.InstanceExtra.Invalid set, so that translate rejects it with
//     reason "malformed" and a logged detail, and the service's other
//     providers are kept.
//  2. The interface is the URL's interface parameter, else its path (Dubbo's
//     URL.getServiceInterface). Group, version, application and weight are
//     the parameters of those names. The protocol is the URL scheme
//     (dubbo, tri, ...), lower-cased.
//  3. One interface-level service per (interface, group, version): Dubbo's
//     service key. Its registries.Service.Name is
//     "providers:<interface>:<version>:<group>", as Dubbo names it in Nacos,
//     whatever the registry.
//  4. A provider process exporting one service over several protocols
//     (dubbo and tri) registers one URL per protocol. Its URLs with the same
//     address are one instance with one port per protocol
//     (registries.InstanceExtra.Ports), so that the service gets one port per
//     protocol and every endpoint of a port speaks its protocol: a gRPC
//     client is never sent to a dubbo port. Two processes on one address
//     exporting the same protocol on two ports are two instances (paired by
//     port order). Two URLs of one address, port and protocol are one
//     registration (a restarted provider's previous URL lingers until its
//     ZooKeeper session expires; Nacos lists an address once per cluster):
//     the one with the greatest timestamp parameter is kept, so that no two
//     instances share an ID. An IP address is compared and written in its
//     canonical form (::1 for 0:0:0:0:0:0:0:1, an IPv4-mapped address as
//     IPv4). The instance ID is "<address>:<port>" of its lowest port.
//  5. Labels are what users select providers by: the URL parameters
//     (interface-level) or the instance metadata (application-level) less
//     every parameter Dubbo itself writes (frameworkParams: those of Apache
//     Dubbo 3.3 Java and dubbo-go v3.3, from pid, timestamp and revision to
//     serialization and service-name-mapping), less empty values (dubbo-go
//     writes dozens) and the configured dropParams. What stays: version,
//     group, application, the routing tag dubbo.tag, and the user's own
//     parameters (env, zone, ...); the host carries the interface, the ports
//     the protocols, the weight the weight. Methods are kept apart
//     (registries.InstanceExtra.Methods): translate writes their union into the
//     ServiceEntry's meshbridge.io/dubbo-methods annotation.
//  6. Weight: the weight parameter; 0, absent or invalid is Dubbo's default
//     100, model.DefaultWeight (dubbo-go registers weight=0).
//  7. An application-level instance's ports are its dubbo.endpoints; without
//     them, its own port with an unknown protocol. Its ID is "<ip>:<port>",
//     the ServiceInstance id (the IP spelled as in rule 4). Two instances of
//     one ID are one, the one with the greatest timestamp metadata, as in
//     rule 4. Instances of one address whose dubbo.endpoints list the same
//     ports and protocols are one process (dubbo-go registers one instance
//     per protocol port, each listing every endpoint): one instance, the one
//     with the lowest port, so that no endpoint is counted twice.
//  8. Config.Mode selects which services a registry emits: interface,
//     application or both (the default).
//  9. MetadataInfo (Dubbo 3's per-revision description of an application's
//     services) in a ZooKeeper metadata report lies at
//     <root>/metadata/<application>/<revision> (Apache Dubbo Java) or
//     <root>/<application>/<revision> (dubbo-go) (MetadataPaths); its
//     methods are the union of its services' methods parameters, and its
//     call defaults (timeout, retries, loadbalance) its services' when they
//     all declare the same (ReadMetadata), checked to be of that
//     application and revision. An application-level instance gets the
//     call defaults of its revision, as an interface-level one gets its
//     URL's (registries.ProviderDefaults).
//  10. A service is named by the host template of its level
//     (Config.InterfaceHostTemplate, ApplicationHostTemplate; defaults
//     DefaultInterfaceHostTemplate, DefaultApplicationHostTemplate, over
//     .Interface, .Group, .Version with "." replaced by "-", .Application
//     and .Namespace): Builder.Named sets registries.Service.Host, or
//     HostError when the template fails on the service's data, and
//     PortPerProtocol. The templates are checked when the configuration is
//     (Config.Validate), as a registry's hostTemplate is
//     (registries.ParseHostTemplate).
//
// Dubbo Admin's override and configurator rules (disable a provider, change
// a weight) are not read.
package dubbo
