// A proxyless gRPC client in Node.js: grpc-js with @grpc/grpc-js-xds resolves
// xds:///<host>:<port> through the xDS server named in the bootstrap file
// GRPC_XDS_BOOTSTRAP (or the JSON in GRPC_XDS_BOOTSTRAP_CONFIG), and calls
// meshbridge.example.Echo/Whoami (examples/grpc/echo/echo.proto). One line
// per call on stdout, as the Go client (examples/grpc/client) prints them:
//
//   <RFC 3339 time> ok <backend name>
//   <RFC 3339 time> error <message>
//
// Usage: node client.js --target xds:///echo.service.consul:8080
//          [--count N (0 = until killed)] [--interval-ms 200] [--timeout-ms 2000]
//          [--cycle-header name=N (header name = v<i mod N> on call i)]
//          [--concurrency K (K calls in flight at once, sharing --count)]
//          [--xds-creds (apply the TLS the xDS clusters carry, gRFC A29)]
'use strict';

const path = require('node:path');
const { parseArgs } = require('node:util');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');

// Registers the xds: resolver and the xDS load-balancing policies with grpc-js.
require('@grpc/grpc-js-xds').register();

const { values: args } = parseArgs({
  options: {
    target: { type: 'string' },
    count: { type: 'string', default: '0' },
    'interval-ms': { type: 'string', default: '200' },
    'timeout-ms': { type: 'string', default: '2000' },
    'cycle-header': { type: 'string', default: '' },
    concurrency: { type: 'string', default: '1' },
    'xds-creds': { type: 'boolean', default: false },
  },
  strict: true,
});
if (!args.target) {
  console.error('client.js: --target is required');
  process.exit(2);
}
const count = Number(args.count);
const intervalMs = Number(args['interval-ms']);
const timeoutMs = Number(args['timeout-ms']);
const [cycleName, cycleCount] = args['cycle-header'] ? args['cycle-header'].split('=') : ['', '0'];
const cycleN = Number(cycleCount);
const concurrency = Number(args.concurrency);
if (!(concurrency >= 1)) {
  console.error('client.js: --concurrency must be at least 1');
  process.exit(2);
}

const definition = protoLoader.loadSync(
  path.join(__dirname, '..', '..', '..', 'examples', 'grpc', 'echo', 'echo.proto'));
const { Echo } = grpc.loadPackageDefinition(definition).meshbridge.example;
// Plaintext to the backends (the bootstrap's channel_creds secure the xDS
// stream only), or with --xds-creds the TLS each cluster carries, from the
// bootstrap's certificate provider, and plaintext where it carries none.
const insecure = grpc.credentials.createInsecure();
const client = new Echo(args.target,
  args['xds-creds'] ? new (require('@grpc/grpc-js-xds').XdsChannelCredentials)(insecure) : insecure);

// K loops share the calls: each takes the next number, calls, and pauses
// --interval-ms after the answer before its next call.
let next = 0;
let running = concurrency;

function loop() {
  const i = next++;
  if (count !== 0 && i >= count) {
    if (--running === 0) {
      client.close();
    }
    return;
  }
  const metadata = new grpc.Metadata();
  if (cycleN > 0) {
    metadata.set(cycleName.toLowerCase(), `v${i % cycleN}`);
  }
  client.Whoami({ value: 'hello' }, metadata, { deadline: Date.now() + timeoutMs }, (err, reply) => {
    const now = new Date().toISOString();
    if (err) {
      // The status name, as the other clients print it ("DEADLINE_EXCEEDED").
      process.stdout.write(`${now} error ${grpc.status[err.code] ?? err.code} ${err.details}\n`);
    } else {
      process.stdout.write(`${now} ok ${reply.value}\n`);
    }
    setTimeout(loop, intervalMs);
  });
}

process.on('SIGTERM', () => {
  client.close();
  process.exit(0);
});
for (let k = 0; k < concurrency; k++) {
  loop();
}
