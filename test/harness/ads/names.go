package ads

import (
	"fmt"
	"strconv"

	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/types/known/anypb"
)

// mcpResource is the type of the resources of an MCP response
// (istio.mcp.v1alpha1.Resource): its name is metadata.name, field 1 of
// field 1.
const mcpResource = "type.googleapis.com/istio.mcp.v1alpha1.Resource"

// nameOf returns a SotW resource's name.
func nameOf(a *anypb.Any) string {
	if a.GetTypeUrl() == mcpResource {
		return ResourceName(bytesField1(a.GetValue()))
	}
	return ResourceName(a.GetValue())
}

// ResourceName reads field 1 of an encoded Listener, RouteConfiguration,
// Cluster or ClusterLoadAssignment (name, cluster_name) without
// unmarshalling the rest.
func ResourceName(b []byte) string {
	return string(bytesField1(b))
}

// bytesField1 returns the value of field 1 of an encoded message when it
// is length-delimited, else nil.
func bytesField1(b []byte) []byte {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return nil
			}
			return v
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return nil
		}
		b = b[n:]
	}
	return nil
}

// Endpoints decodes a ClusterLoadAssignment and returns its cluster name
// and the "address:port" of each of its endpoints, in order.
func Endpoints(a *anypb.Any) (cluster string, endpoints []string, err error) {
	cla := &endpoint.ClusterLoadAssignment{}
	if err := a.UnmarshalTo(cla); err != nil {
		return "", nil, fmt.Errorf("decode ClusterLoadAssignment: %w", err)
	}
	for _, loc := range cla.GetEndpoints() {
		for _, lb := range loc.GetLbEndpoints() {
			sa := lb.GetEndpoint().GetAddress().GetSocketAddress()
			endpoints = append(endpoints, sa.GetAddress()+":"+strconv.FormatUint(uint64(sa.GetPortValue()), 10))
		}
	}
	return cla.GetClusterName(), endpoints, nil
}
