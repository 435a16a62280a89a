package gen

import (
	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/xds/bootstrap"
)

// Upstream TLS (gRFC A29). A proxyless client reads its certificates from
// the certificate provider instances its bootstrap declares, never from
// files or secrets the control plane names; a cluster says which instance
// verifies the server (validation_context.ca_certificate_provider_instance)
// and, for mTLS, which presents the client's certificate
// (tls_certificate_provider_instance), and the SANs the server's
// certificate must carry (match_subject_alt_names, exact). Every cluster
// names the one instance CertProviderInstance, as istiod does for
// proxyless clients (the instance istio-agent writes), and `meshbridge
// bootstrap --tls-*` writes it as a file_watcher. So:
//   - tls.mode SIMPLE verifies the server against the instance's CA;
//     MUTUAL and ISTIO_MUTUAL also present the instance's certificate
//     (ISTIO_MUTUAL as istiod serves it to proxyless clients);
//   - tls.subjectAltNames are the SANs asked of the server; with none,
//     any certificate the CA signed passes (as with Envoy);
//   - the DestinationRule's file paths and credentialName, sni and
//     insecureSkipVerify are not served (Unserved names them): the client
//     uses its bootstrap's instance, and always verifies.
//
// A client that would NACK the context (it lacks A29, or its node does not
// declare the instance: both NACK an unknown instance name, and a NACK
// rejects the whole CDS response) is refused the cluster's endpoints
// instead (refuseTLS): it is never served the cluster without TLS.

// CertProviderInstance is the bootstrap certificate provider instance
// every TLS cluster names (istio-agent's and istiod's "default").
const CertProviderInstance = bootstrap.CertificateProviderInstance

// Certificate names within CertProviderInstance, as istiod sends them; a
// file_watcher instance has one of each and ignores the names.
const (
	identityCertName = "default"
	rootCertName     = "ROOTCA"
)

// RefusedEDSPrefix starts the EDS service name of a cluster whose TLS a
// client cannot apply (refuseTLS): the bridge serves a
// ClusterLoadAssignment of that name without endpoints
// (LoadAssignments), so the client has no endpoint to call and its calls
// fail at once.
const RefusedEDSPrefix = "tls-refused-no-certificate-provider:"

// tlsModes are the ClientTLSSettings modes served with TLS, and whether
// the client presents a certificate.
var tlsModes = map[networking.ClientTLSSettings_TLSmode]bool{
	networking.ClientTLSSettings_SIMPLE:       false,
	networking.ClientTLSSettings_MUTUAL:       true,
	networking.ClientTLSSettings_ISTIO_MUTUAL: true,
}

// usesTLS reports whether s asks for TLS (a mode other than DISABLE).
func usesTLS(s *networking.ClientTLSSettings) bool {
	_, ok := tlsModes[s.GetMode()]
	return ok
}

// applyTLS sets on c the transport socket s asks for, for a client
// lacking lacks: the UpstreamTlsContext, or refuseTLS when the client
// lacks UpstreamTLS; substituted names the refusal
// ("tls.mode:SIMPLE:refused"). Nothing when s asks for no TLS.
func applyTLS(c *cluster.Cluster, s *networking.ClientTLSSettings, lacks Features) (substituted []string) {
	mutual, ok := tlsModes[s.GetMode()]
	if !ok {
		return nil
	}
	if lacks&UpstreamTLS != 0 {
		refuseTLS(c)
		return []string{"tls.mode:" + s.GetMode().String() + ":refused"}
	}
	validation := &tlsv3.CertificateValidationContext{
		CaCertificateProviderInstance: &tlsv3.CertificateProviderPluginInstance{
			InstanceName: CertProviderInstance, CertificateName: rootCertName},
	}
	for _, san := range s.GetSubjectAltNames() {
		validation.MatchSubjectAltNames = append(validation.MatchSubjectAltNames,
			&matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: san}})
	}
	common := &tlsv3.CommonTlsContext{
		ValidationContextType: &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: validation},
	}
	if mutual {
		common.TlsCertificateProviderInstance = &tlsv3.CertificateProviderPluginInstance{
			InstanceName: CertProviderInstance, CertificateName: identityCertName}
	}
	c.TransportSocket = &core.TransportSocket{
		Name:       "envoy.transport_sockets.tls",
		ConfigType: &core.TransportSocket_TypedConfig{TypedConfig: mustAny(&tlsv3.UpstreamTlsContext{CommonTlsContext: common})},
	}
	return nil
}

// refuseTLS makes c a cluster with no endpoint for a client that cannot
// apply its TLS: its EDS service name is one whose assignment has no
// endpoints (RefusedEDSPrefix), and it has no transport socket for the
// client to reject. Serving the cluster without TLS instead would send the client's
// calls in plaintext.
func refuseTLS(c *cluster.Cluster) {
	c.EdsClusterConfig.ServiceName = RefusedEDSPrefix + c.Name
	c.TransportSocket = nil
}
