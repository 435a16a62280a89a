package gen

import (
	"strings"
	"testing"

	cluster "github.com/envoyproxy/go-control-plane/envoy/config/cluster/v3"
	tlsv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/transport_sockets/tls/v3"
	matcher "github.com/envoyproxy/go-control-plane/envoy/type/matcher/v3"
	"google.golang.org/protobuf/proto"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// TestUpstreamTLS: a DestinationRule's tls is the cluster's
// UpstreamTlsContext naming the bootstrap's certificate provider instance
// (gRFC A29): the CA to verify the server for SIMPLE, also the client's
// certificate for MUTUAL and ISTIO_MUTUAL, the SANs asked as exact
// matchers; DISABLE is plaintext. A client lacking UpstreamTLS is refused
// the cluster's endpoints (an EDS name never served), never served it
// without TLS, and the refusal is named.
func TestUpstreamTLS(t *testing.T) {
	root := &tlsv3.CertificateProviderPluginInstance{InstanceName: "default", CertificateName: "ROOTCA"}
	identity := &tlsv3.CertificateProviderPluginInstance{InstanceName: "default", CertificateName: "default"}
	exact := func(s string) *matcher.StringMatcher {
		return &matcher.StringMatcher{MatchPattern: &matcher.StringMatcher_Exact{Exact: s}}
	}
	validation := func(sans ...*matcher.StringMatcher) *tlsv3.CommonTlsContext_ValidationContext {
		return &tlsv3.CommonTlsContext_ValidationContext{ValidationContext: &tlsv3.CertificateValidationContext{
			CaCertificateProviderInstance: root, MatchSubjectAltNames: sans}}
	}
	cases := map[string]struct {
		tls  *networking.ClientTLSSettings
		want *tlsv3.UpstreamTlsContext // nil: plaintext
	}{
		"none":    {},
		"DISABLE": {tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE}},
		"SIMPLE, no SAN": {tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE},
			want: &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{ValidationContextType: validation()}}},
		"SIMPLE, SANs": {tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE,
			SubjectAltNames: []string{"echo.example", "spiffe://cluster.local/ns/a/sa/echo"}},
			want: &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				ValidationContextType: validation(exact("echo.example"), exact("spiffe://cluster.local/ns/a/sa/echo"))}}},
		"MUTUAL": {tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_MUTUAL, SubjectAltNames: []string{"echo.example"}},
			want: &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsCertificateProviderInstance: identity, ValidationContextType: validation(exact("echo.example"))}}},
		"ISTIO_MUTUAL": {tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_ISTIO_MUTUAL},
			want: &tlsv3.UpstreamTlsContext{CommonTlsContext: &tlsv3.CommonTlsContext{
				TlsCertificateProviderInstance: identity, ValidationContextType: validation()}}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 8080, Protocol: model.ProtocolGRPC}},
				Policy: &networking.DestinationRule{Host: "a.local", TrafficPolicy: &networking.TrafficPolicy{Tls: tc.tls}}}
			c, substituted := clusterFor(svc, svc.Ports[0], nil, AllFeatures&^UpstreamTLS)
			assertEqual(t, []string(nil), substituted)
			assertEqual(t, "outbound|8080||a.local", c.GetEdsClusterConfig().GetServiceName())
			if tc.want == nil {
				assertEqual(t, false, c.TransportSocket != nil)
				return
			}
			got := &tlsv3.UpstreamTlsContext{}
			if err := c.GetTransportSocket().GetTypedConfig().UnmarshalTo(got); err != nil {
				t.Fatalf("transport socket: %v", err)
			}
			assertEqual(t, "envoy.transport_sockets.tls", c.GetTransportSocket().GetName())
			assertEqual(t, tc.want, got)

			// A client lacking A29: no endpoint, no plaintext.
			refused, substituted := clusterFor(svc, svc.Ports[0], nil, UpstreamTLS)
			assertEqual(t, []string{"tls.mode:" + tc.tls.GetMode().String() + ":refused"}, substituted)
			assertEqual(t, RefusedEDSPrefix+"outbound|8080||a.local", refused.GetEdsClusterConfig().GetServiceName())
			assertEqual(t, false, refused.TransportSocket != nil)
		})
	}
}

// TestUpstreamTLSVaries: a TLS cluster is Varied: a client lacking
// UpstreamTLS (whatever else it lacks) gets the refused form, every other
// client the own form; a subset with its own tls overrides the host's.
func TestUpstreamTLSVaries(t *testing.T) {
	svc := &model.Service{Hostname: "a.local", Ports: []model.Port{{Name: "grpc", Number: 8080, Protocol: model.ProtocolGRPC}},
		Policy: &networking.DestinationRule{Host: "a.local",
			TrafficPolicy: &networking.TrafficPolicy{Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_SIMPLE}},
			Subsets: []*networking.Subset{
				{Name: "plain", Labels: map[string]string{"v": "1"}, TrafficPolicy: &networking.TrafficPolicy{
					Tls: &networking.ClientTLSSettings{Mode: networking.ClientTLSSettings_DISABLE}}},
				{Name: "inherits", Labels: map[string]string{"v": "2"}},
			}}}
	clusters, _, _ := Resources(svc)
	refusedIn := map[string]bool{}
	for _, res := range clusters {
		v, ok := res.(*Varied)
		if !ok {
			name := res.(*Encoded).GetName()
			refusedIn[name] = false
			continue
		}
		name := v.GetName()
		for p := 1; p < NumProfiles; p++ {
			wire, substituted := v.Variant(p)
			lacksTLS := Features(p)&UpstreamTLS != 0
			if (wire != nil) != lacksTLS {
				t.Errorf("%s: profile %d (lacking %v) has a variant: %v", name, p, Features(p).Names(), wire != nil)
				continue
			}
			if !lacksTLS {
				continue
			}
			c := &cluster.Cluster{}
			if err := proto.Unmarshal(wire, c); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(c.GetEdsClusterConfig().GetServiceName(), RefusedEDSPrefix) || c.TransportSocket != nil {
				t.Errorf("%s: profile %d is served %v, want the refused form", name, p, c)
			}
			assertEqual(t, []string{"tls.mode:SIMPLE:refused"}, substituted)
			refusedIn[name] = true
		}
	}
	assertEqual(t, map[string]bool{
		"outbound|8080||a.local":         true,
		"outbound|8080|plain|a.local":    false,
		"outbound|8080|inherits|a.local": true,
	}, refusedIn)
}
