package io.meshbridge.dubbo;

import com.google.protobuf.StringValue;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import org.apache.dubbo.config.ApplicationConfig;
import org.apache.dubbo.config.MetadataReportConfig;
import org.apache.dubbo.config.ProtocolConfig;
import org.apache.dubbo.config.RegistryConfig;
import org.apache.dubbo.config.ServiceConfig;
import org.apache.dubbo.config.bootstrap.DubboBootstrap;
import org.apache.dubbo.demo.GreetService;

/**
 * The Apache Dubbo (Java) test provider: exports GreetService over the
 * protocols asked for and registers it in one registry, then prints
 * "provider ready". Flags (all "-name value"): -registry
 * zookeeper://HOST:PORT or nacos://HOST:PORT; -register interface, instance
 * or all (Dubbo's register-mode); -app; -host (the address to bind and
 * register; Dubbo refuses a loopback one); -group; -version; -protocols
 * tri,dubbo; -tri-port; -dubbo-port; -metadata local or remote (remote: the
 * MetadataInfo goes to the registry's metadata report); -metadata-port
 * (local: the MetadataService's port); -weight; -param key=value
 * (repeatable: a service URL parameter, e.g. a call default timeout=200);
 * -greet-delay-ms (Greet answers after it). SIGTERM runs Dubbo's own
 * shutdown hook (unregister, then close).
 */
public final class Provider {
    private Provider() {}

    public static void main(String[] args) throws InterruptedException {
        Map<String, String> o = new HashMap<>();
        Map<String, String> params = new HashMap<>();
        for (int i = 0; i + 1 < args.length; i += 2) {
            if (!args[i].startsWith("-")) {
                throw new IllegalArgumentException("flag expected, got " + args[i]);
            }
            if (args[i].equals("-param")) {
                String[] kv = args[i + 1].split("=", 2);
                if (kv.length != 2 || kv[0].isEmpty()) {
                    throw new IllegalArgumentException("-param wants key=value, got " + args[i + 1]);
                }
                params.put(kv[0], kv[1]);
                continue;
            }
            o.put(args[i].substring(1), args[i + 1]);
        }
        String app = o.getOrDefault("app", "dubbo-java-provider");
        String host = o.get("host");

        ApplicationConfig application = new ApplicationConfig(app);
        application.setRegisterMode(o.getOrDefault("register", "all"));
        application.setMetadataType(o.getOrDefault("metadata", "local"));
        application.setQosEnable(false);
        if (o.containsKey("metadata-port")) {
            application.setMetadataServicePort(Integer.parseInt(o.get("metadata-port")));
        }

        RegistryConfig registry = new RegistryConfig(o.get("registry"));
        List<ProtocolConfig> protocols = new ArrayList<>();
        for (String name : o.getOrDefault("protocols", "tri").split(",")) {
            ProtocolConfig p = new ProtocolConfig(name, Integer.parseInt(o.get(name + "-port")));
            if (host != null) {
                p.setHost(host);
            }
            protocols.add(p);
        }

        ServiceConfig<GreetService> service = new ServiceConfig<>();
        service.setInterface(GreetService.class);
        String first = o.getOrDefault("protocols", "tri").split(",")[0];
        service.setRef(new Greeter(app, host + ":" + o.getOrDefault("tri-port", o.get(first + "-port")),
                Long.parseLong(o.getOrDefault("greet-delay-ms", "0"))));
        if (!params.isEmpty()) {
            service.setParameters(params);
        }
        if (o.containsKey("group")) {
            service.setGroup(o.get("group"));
        }
        if (o.containsKey("version")) {
            service.setVersion(o.get("version"));
        }
        if (o.containsKey("weight")) {
            service.setWeight(Integer.parseInt(o.get("weight")));
        }

        DubboBootstrap bootstrap = DubboBootstrap.getInstance()
                .application(application)
                .registry(registry)
                .protocols(protocols)
                .service(service);
        if ("remote".equals(o.get("metadata"))) {
            bootstrap.metadataReport(new MetadataReportConfig(o.get("registry")));
        }
        bootstrap.start();
        System.out.println("provider ready");
        new CountDownLatch(1).await();
    }

    /**
     * Answers "hello NAME from APP@HOST:PORT" ("hi ..." for Hello), PORT the
     * Triple port (else the first protocol's), as the dubbo-go provider.
     */
    static final class Greeter implements GreetService {
        private final String from;
        private final long greetDelayMs;

        Greeter(String app, String address, long greetDelayMs) {
            this.from = app + "@" + address;
            this.greetDelayMs = greetDelayMs;
        }

        private void delay() {
            if (greetDelayMs <= 0) {
                return;
            }
            try {
                Thread.sleep(greetDelayMs);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        private StringValue say(String word, StringValue name) {
            return StringValue.of(word + " " + name.getValue() + " from " + from);
        }

        @Override
        public StringValue Greet(StringValue name) {
            delay();
            return say("hello", name);
        }

        @Override
        public StringValue Hello(StringValue name) {
            return say("hi", name);
        }

        @Override
        public StringValue greet(StringValue name) {
            return say("hello", name);
        }

        @Override
        public StringValue hello(StringValue name) {
            return say("hi", name);
        }
    }
}
