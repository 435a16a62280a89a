package gen

import (
	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
)

// Features are the optional xDS features a generated resource may use
// that not every client accepts (a client NACKs a cluster whose lb_policy
// it does not implement, and the NACK rejects the whole CDS response).
// Which client accepts which is package xds's client table; here a
// resource is generated once for a client accepting every feature and
// once more for each set of lacking features that changes it (Varied).
type Features uint8

const (
	// LeastRequest is a cluster's lb_policy LEAST_REQUEST (gRFC A48).
	LeastRequest Features = 1 << iota
	// RandomLB is a cluster's lb_policy RANDOM, which Envoy implements and
	// no gRPC client does.
	RandomLB
	// RingHash is a cluster's lb_policy RING_HASH (gRFC A42), which gRPC
	// C-core 1.51 crashes on (grpc/grpc#31766).
	RingHash
	// UpstreamTLS is a cluster's transport_socket UpstreamTlsContext whose
	// certificates come from the certificate provider instance
	// CertProviderInstance of the client's bootstrap (gRFC A29). A client
	// that lacks it (no A29, or a bootstrap that declares no such instance,
	// which it would NACK) is refused the cluster's endpoints (refuseTLS),
	// never served them in plaintext.
	UpstreamTLS

	// AllFeatures is every optional feature.
	AllFeatures = LeastRequest | RandomLB | RingHash | UpstreamTLS
)

// NumProfiles is how many profiles there are: a profile is the set of
// Features a client lacks, as an int in [0, NumProfiles); profile 0 lacks
// none and is served each resource's own encoding.
const NumProfiles = int(AllFeatures) + 1

// featureNames name each feature in logs and status, with its source.
var featureNames = map[Features]string{
	LeastRequest: "lb_policy LEAST_REQUEST (gRFC A48)",
	RandomLB:     "lb_policy RANDOM (Envoy only)",
	RingHash:     "lb_policy RING_HASH (gRFC A42)",
	UpstreamTLS:  "transport_socket UpstreamTlsContext from a certificate provider (gRFC A29)",
}

// Names returns the names of the features in f, in bit order.
func (f Features) Names() []string {
	var out []string
	for bit := Features(1); bit != 0 && bit <= AllFeatures; bit <<= 1 {
		if f&bit != 0 {
			out = append(out, featureNames[bit])
		}
	}
	return out
}

// Varied is a resource whose form depends on the client: the embedded
// Encoded is the form for a client lacking no feature (profile 0), and
// Variant gives each other profile's. The xDS cache serves each stream its
// profile's form (xds/cache, Resources.ServeProfiles). Immutable.
type Varied struct {
	*Encoded
	// variants are the forms of profiles 1 … NumProfiles-1, by profile-1;
	// a zero variant means the profile is served the own encoding.
	variants [NumProfiles - 1]variant
}

type variant struct {
	wire []byte
	// substituted names what the variant serves instead of the policy's
	// asked value ("loadBalancer.simple:LEAST_REQUEST").
	substituted []string
}

// Variant returns profile p's encoding and what it substitutes; nil when
// p is served the resource's own encoding (p is 0, out of range, or lacks
// nothing the resource uses). The bytes are shared: read-only.
func (v *Varied) Variant(p int) (wire []byte, substituted []string) {
	if p < 1 || p >= NumProfiles {
		return nil, nil
	}
	x := v.variants[p-1]
	return x.wire, x.substituted
}

// vary returns the resource of a message built by build, which returns
// what a client lacking lacks is served and the fields it substituted:
// an Encoded when no profile changes it (uses, the features the message
// can use, is 0), else a Varied built once per distinct set of lacking
// features that it uses.
func vary(name string, uses Features, build func(lacks Features) (proto.Message, []string)) types.Resource {
	own, _ := build(0)
	res := Encode(name, own)
	enc, ok := res.(*Encoded)
	if uses == 0 || !ok {
		return res
	}
	v := &Varied{Encoded: enc}
	built := map[Features]variant{}
	for p := 1; p < NumProfiles; p++ {
		lacks := Features(p) & uses
		if lacks == 0 {
			continue
		}
		x, ok := built[lacks]
		if !ok {
			m, substituted := build(lacks)
			wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
			if err != nil {
				return m // the cache's marshal fails as it would for m
			}
			x = variant{wire: wire, substituted: substituted}
			built[lacks] = x
		}
		v.variants[p-1] = x
	}
	return v
}
