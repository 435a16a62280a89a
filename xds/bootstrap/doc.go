// Package bootstrap renders the xDS bootstrap of a proxyless gRPC client of
// meshbridge: the JSON document a gRPC process reads from the file named by
// GRPC_XDS_BOOTSTRAP (or from GRPC_XDS_BOOTSTRAP_CONFIG itself) before it
// resolves an xds:///<host>:<port> target. The format is gRPC's (gRFC A27,
// A30, A65; grpc/grpc doc/grpc_xds_bootstrap_format.md):
//
//	{
//	  "xds_servers": [{
//	    "server_uri": "127.0.0.1:15010",
//	    "channel_creds": [{"type": "insecure"}],
//	    "server_features": ["xds_v3"]
//	  }],
//	  "node": {
//	    "id": "checkout-7d9f",
//	    "locality": {"region": "eu-west-1", "zone": "eu-west-1a"},
//	    "metadata": {"GENERATOR": "grpc"}
//	  }
//	}
//
// Rules:
//  1. node.metadata.GENERATOR is "grpc", which makes meshbridge, like istiod,
//     serve the client Listeners and RouteConfigurations besides Clusters and
//     ClusterLoadAssignments (xds.GeneratorGRPC).
//  2. node.id is required and node.locality is always present, empty or not:
//     grpc-js-xds (1.14) rejects a bootstrap without either ("id field
//     missing in node element", "locality field missing in node element");
//     grpc-go and gRPC C-core accept both.
//  3. channel_creds holds exactly one entry, so a client never falls back to
//     weaker credentials than those asked for: "insecure" (plaintext), or
//     "tls" (gRFC A65: server verified against ca_certificate_file, or the
//     system roots when it is empty; certificate_file and private_key_file,
//     set together, add a client certificate for mTLS). A client that does
//     not know "tls" refuses the bootstrap rather than connecting in
//     plaintext. "tls" is supported by grpc-go from 1.61 and gRPC C-core from
//     1.65, not by grpc-js-xds (1.14) nor Debian 12's python3-grpcio (C-core
//     1.51), which accept only "insecure" and "google_default".
//  4. server_features is ["xds_v3"] (gRFC A30; ignored by clients that speak
//     only v3). It never holds "ignore_resource_deletion" (gRFC A53): a
//     service meshbridge stops serving must disappear from its clients.
//  5. certificate_providers holds one instance, CertificateProviderInstance
//     ("default"), a file_watcher of Config.Certificates, only when they are
//     given; node.metadata then declares it (MetadataCertificateProvider),
//     since a client NACKs a cluster naming an instance its bootstrap lacks,
//     and the bridge serves TLS clusters (gRFC A29) only to clients that
//     declare it. No server listener template (gRFC A36): meshbridge serves
//     no server-side Listeners.
//  6. File paths are written as given: they are the client's paths, resolved
//     against the client's working directory when relative.
//
// Not here: reading meshbridge's configuration (cmd/bridge's `meshbridge
// bootstrap` does), xDS federation (authorities).
package bootstrap
