package io.meshbridge.grpcjava;

import com.google.protobuf.StringValue;
import io.grpc.CallOptions;
import io.grpc.Channel;
import io.grpc.ChannelCredentials;
import io.grpc.ClientInterceptors;
import io.grpc.Grpc;
import io.grpc.InsecureChannelCredentials;
import io.grpc.ManagedChannel;
import io.grpc.Metadata;
import io.grpc.MethodDescriptor;
import io.grpc.StatusRuntimeException;
import io.grpc.protobuf.ProtoUtils;
import io.grpc.stub.ClientCalls;
import io.grpc.stub.MetadataUtils;
import io.grpc.xds.XdsChannelCredentials;
import java.util.Locale;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A proxyless gRPC client on grpc-java with grpc-xds: it resolves
 * xds:///HOST:PORT through the xDS server named in the bootstrap file
 * GRPC_XDS_BOOTSTRAP and calls meshbridge.example.Echo/Whoami
 * (examples/grpc/echo/echo.proto) with google.protobuf.StringValue messages.
 * One line per call on stdout, as the Go client (examples/grpc/client)
 * prints them: "TIME ok BACKEND" or "TIME error MESSAGE".
 *
 * <p>Flags: --target xds:///echo.service.consul:8080 [--count N (0 = until
 * killed)] [--interval-ms 200] [--timeout-ms 2000] [--method
 * /meshbridge.example.Echo/Whoami] [--message hello] [--cycle-header name=N
 * (header name = v(i mod N) on call i)] [--concurrency K (K calls in flight at
 * once, sharing --count)] [--xds-creds (apply the TLS the xDS clusters carry,
 * gRFC A29)].
 */
public final class Client {
    private Client() {}

    public static void main(String[] args) throws InterruptedException {
        String target = null;
        String method = "/meshbridge.example.Echo/Whoami";
        String message = "hello";
        long count = 0;
        long intervalMs = 200;
        long timeoutMs = 2000;
        String cycleName = "";
        long cycleN = 0;
        int concurrency = 1;
        boolean xdsCreds = false;
        for (int i = 0; i < args.length; i++) {
            String flag = args[i];
            if (flag.equals("--xds-creds")) {
                xdsCreds = true;
                continue;
            }
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("flag " + flag + " needs a value");
            }
            String value = args[++i];
            switch (flag) {
                case "--target" -> target = value;
                case "--count" -> count = Long.parseLong(value);
                case "--interval-ms" -> intervalMs = Long.parseLong(value);
                case "--timeout-ms" -> timeoutMs = Long.parseLong(value);
                case "--method" -> method = value;
                case "--message" -> message = value;
                case "--concurrency" -> concurrency = Integer.parseInt(value);
                case "--cycle-header" -> {
                    String[] parts = value.split("=", 2);
                    cycleName = parts[0].toLowerCase(Locale.ROOT);
                    cycleN = Long.parseLong(parts[1]);
                }
                default -> throw new IllegalArgumentException("unknown flag " + flag);
            }
        }
        if (target == null) {
            throw new IllegalArgumentException("--target is required");
        }
        if (concurrency < 1) {
            throw new IllegalArgumentException("--concurrency must be at least 1");
        }
        MethodDescriptor<StringValue, StringValue> whoami = MethodDescriptor.<StringValue, StringValue>newBuilder()
                .setType(MethodDescriptor.MethodType.UNARY)
                .setFullMethodName(method.startsWith("/") ? method.substring(1) : method)
                .setRequestMarshaller(ProtoUtils.marshaller(StringValue.getDefaultInstance()))
                .setResponseMarshaller(ProtoUtils.marshaller(StringValue.getDefaultInstance()))
                .build();
        // Plaintext to the backends (the bootstrap's channel_creds secure the
        // xDS stream only), or with --xds-creds the TLS each cluster carries,
        // from the bootstrap's certificate provider, and plaintext where it
        // carries none.
        ChannelCredentials creds = InsecureChannelCredentials.create();
        if (xdsCreds) {
            creds = XdsChannelCredentials.create(creds);
        }
        ManagedChannel channel = Grpc.newChannelBuilder(target, creds).build();
        Runtime.getRuntime().addShutdownHook(new Thread(channel::shutdownNow));
        // K loops share the calls: each takes the next number, calls, and
        // pauses --interval-ms after the answer before its next call.
        AtomicLong next = new AtomicLong();
        final long calls = count, pause = intervalMs, deadlineMs = timeoutMs, cycle = cycleN;
        final String cycleKey = cycleName, sent = message;
        List<Thread> loops = new ArrayList<>();
        for (int k = 0; k < concurrency; k++) {
            Thread loop = new Thread(() -> {
                for (long i = next.getAndIncrement(); calls == 0 || i < calls; i = next.getAndIncrement()) {
                    String result;
                    Channel calling = channel;
                    if (cycle > 0) {
                        Metadata md = new Metadata();
                        md.put(Metadata.Key.of(cycleKey, Metadata.ASCII_STRING_MARSHALLER), "v" + (i % cycle));
                        calling = ClientInterceptors.intercept(channel, MetadataUtils.newAttachHeadersInterceptor(md));
                    }
                    try {
                        StringValue reply = ClientCalls.blockingUnaryCall(calling, whoami,
                                CallOptions.DEFAULT.withDeadlineAfter(deadlineMs, TimeUnit.MILLISECONDS), StringValue.of(sent));
                        result = "ok " + reply.getValue();
                    } catch (StatusRuntimeException e) {
                        result = "error " + e.getStatus().getCode() + " " + e.getStatus().getDescription();
                    }
                    synchronized (System.out) {
                        System.out.println(Instant.now() + " " + result);
                        System.out.flush();
                    }
                    try {
                        Thread.sleep(pause);
                    } catch (InterruptedException e) {
                        return;
                    }
                }
            });
            loop.start();
            loops.add(loop);
        }
        for (Thread loop : loops) {
            loop.join();
        }
        channel.shutdownNow();
    }
}
