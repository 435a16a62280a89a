#!/usr/bin/python3
"""A proxyless gRPC client in Python on gRPC C-core (Debian's python3-grpcio).

C-core resolves xds:///<host>:<port> through the xDS server named in the
bootstrap file GRPC_XDS_BOOTSTRAP (or the JSON in GRPC_XDS_BOOTSTRAP_CONFIG)
and the client calls meshbridge.example.Echo/Whoami
(examples/grpc/echo/echo.proto) with google.protobuf.StringValue messages, so
it needs no generated code. One line per call on stdout, as the Go client
(examples/grpc/client) prints them:

    <RFC 3339 time> ok <backend name>
    <RFC 3339 time> error <message>

Usage: /usr/bin/python3 client.py --target xds:///echo.service.consul:8080
           [--count N (0 = until killed)] [--interval 0.2] [--timeout 2]
           [--cycle-header name=N (header name = v<i mod N> on call i)]
           [--concurrency K (K calls in flight at once, sharing --count)]
           [--xds-creds (apply the TLS the xDS clusters carry, gRFC A29)]
"""

import argparse
import datetime
import itertools
import signal
import sys
import threading
import time

import grpc
import grpc.experimental
from google.protobuf import wrappers_pb2

METHOD = "/meshbridge.example.Echo/Whoami"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="e.g. xds:///echo.service.consul:8080")
    parser.add_argument("--count", type=int, default=0, help="calls to make; 0 = until killed")
    parser.add_argument("--interval", type=float, default=0.2, help="seconds between calls")
    parser.add_argument("--timeout", type=float, default=2.0, help="per-call deadline, seconds")
    parser.add_argument("--cycle-header", default="", help="name=N: header name = v<i mod N> on call i")
    parser.add_argument("--concurrency", type=int, default=1, help="calls in flight at once, sharing --count")
    parser.add_argument("--xds-creds", action="store_true",
                        help="apply the TLS the xDS clusters carry (gRFC A29), plaintext where they carry none")
    args = parser.parse_args()
    cycle_name, cycle_n = "", 0
    if args.cycle_header:
        cycle_name, _, n = args.cycle_header.partition("=")
        cycle_name, cycle_n = cycle_name.lower(), int(n)

    # SIGTERM ends the process like Ctrl-C: the channel closes on the way out.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    # Plaintext to the backends (the bootstrap's channel_creds secure the xDS
    # stream only), or with --xds-creds the TLS each cluster carries, from the
    # bootstrap's certificate provider, and plaintext where it carries none.
    if args.xds_creds:
        creds = grpc.xds_channel_credentials(grpc.experimental.insecure_channel_credentials())
        channel = grpc.secure_channel(args.target, creds)
    else:
        channel = grpc.insecure_channel(args.target)
    with channel:
        whoami = channel.unary_unary(
            METHOD,
            request_serializer=wrappers_pb2.StringValue.SerializeToString,
            response_deserializer=wrappers_pb2.StringValue.FromString,
        )
        numbers = itertools.count()  # the next call's number, shared by the loops
        out = threading.Lock()  # one line per call

        def loop() -> None:
            for i in numbers:
                if args.count != 0 and i >= args.count:
                    return
                try:
                    metadata = [(cycle_name, "v{}".format(i % cycle_n))] if cycle_n > 0 else None
                    reply = whoami(wrappers_pb2.StringValue(value="hello"), timeout=args.timeout, metadata=metadata)
                    result = "ok " + reply.value
                except grpc.RpcError as err:
                    result = "error {} {}".format(err.code().name, err.details())
                now = datetime.datetime.now(datetime.timezone.utc).isoformat()
                with out:
                    print(now, result, flush=True)
                time.sleep(args.interval)

        loops = [threading.Thread(target=loop, daemon=True) for _ in range(max(1, args.concurrency))]
        for t in loops:
            t.start()
        for t in loops:
            while t.is_alive():
                t.join(0.1)  # a join with a timeout lets SIGTERM's handler run
    return 0


if __name__ == "__main__":
    sys.exit(main())
