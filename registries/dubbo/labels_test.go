package dubbo

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Provider URLs and an application-level instance's metadata as the real
// providers register them (seen in the e2e runs): Apache Dubbo 3.3.6
// (Java) and dubbo-go v3.3.2, GreetService version 1.0.0 of application
// greeter, plus a user's own parameter env=prod.
const (
	javaProviderURL = "tri://198.18.0.1:50051/org.apache.dubbo.demo.GreetService?application=greeter&deprecated=false" +
		"&dubbo=2.0.2&dynamic=true&env=prod&generic=false&interface=org.apache.dubbo.demo.GreetService&logger=slf4j" +
		"&metadata-type=remote&methods=Greet,Hello,greet,hello&prefer.serialization=hessian2,fastjson2&release=3.3.6" +
		"&revision=1.0.0&service-name-mapping=true&side=provider&timestamp=1795813890123&version=1.0.0"
	dubboGoProviderURL = "tri://127.0.0.1:35155/org.apache.dubbo.demo.GreetService?IDL-mode=IDL&accesslog=&app.version=" +
		"&application=greeter&application.tag=&auth=&bean.name=TripleGreetService&cluster=failover&config.tracing=" +
		"&env=prod&environment=&execute.limit=&execute.limit.rejected.handler=&export=true" +
		"&interface=org.apache.dubbo.demo.GreetService&loadbalance=random&max-server-recv-msg-size=4mib" +
		"&max-server-send-msg-size=&metadata-type=&module=sample&name=greeter&organization=dubbo-go&owner=dubbo-go" +
		"&param.sign=&pid=17510&registry=nacos&registry.role=3&registry.type=all&release=dubbo-golang-3.3.2&retries=" +
		"&serialization=&service.filter=echo%2Ctoken%2Caccesslog%2Ctps%2Cgeneric_service%2Cexecute%2Cpshutdown" +
		"&side=provider&timestamp=1795812838&tps.limit.interval=&tps.limit.rate=&tps.limit.rejected.handler=" +
		"&tps.limit.strategy=&tps.limiter=&version=1.0.0&warmup=&weight=0"
)

// TestLabelsOfRealProviders: doc.go rule 5 on both providers' real
// registrations: what stays is what users select by (version, application,
// their own env), the same for Dubbo Java and dubbo-go.
func TestLabelsOfRealProviders(t *testing.T) {
	want := map[string]string{"application": "greeter", "version": "1.0.0", "env": "prod"}
	for name, raw := range map[string]string{"dubbo java": javaProviderURL, "dubbo-go": dubboGoProviderURL} {
		t.Run(name, func(t *testing.T) {
			svcs := mustBuilder(t, Config{}).InterfaceServices("", "org.apache.dubbo.demo.GreetService", providers(t, raw), nil)
			if len(svcs) != 1 || len(svcs[0].Instances) != 1 {
				t.Fatalf("services = %+v, want one with one instance", svcs)
			}
			if diff := cmp.Diff(want, svcs[0].Instances[0].Labels); diff != "" {
				t.Errorf("labels (-want +got):\n%s", diff)
			}
		})
	}
	// Dubbo Java's application-level instance (/services/greeter/<ip>:<port>).
	meta := map[string]string{
		MetaEndpoints: `[{"port":50051,"protocol":"tri"},{"port":20880,"protocol":"dubbo"}]`, MetaRevision: "9d99a0c0f94d10e0a217df814565422f",
		"dubbo.metadata.storage-type": "remote", "meta-v": "2.0.0", "timestamp": "1795813890456", "env": "prod",
	}
	inst, err := AppInstanceFromMetadata("greeter", "198.18.0.1", 20880, meta)
	if err != nil {
		t.Fatal(err)
	}
	svc := mustBuilder(t, Config{}).ApplicationService("", "greeter", []AppInstance{inst}, nil, nil)
	if len(svc.Instances) != 1 {
		t.Fatalf("application service = %+v, want one instance", svc)
	}
	if diff := cmp.Diff(map[string]string{"env": "prod"}, svc.Instances[0].Labels); diff != "" {
		t.Errorf("application-level labels (-want +got):\n%s", diff)
	}
}
