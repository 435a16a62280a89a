// Package echo is the example gRPC service of meshbridge's demo and e2e tests:
// one method, meshbridge.example.Echo/Whoami, that answers with the serving
// backend's name. It uses well-known wrapper messages, so it needs no
// generated code.
package echo

import (
	"context"
	"encoding/json"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// Method is the full method name clients call.
const Method = "/meshbridge.example.Echo/Whoami"

// Register serves Whoami on s, answering with name.
func Register(s *grpc.Server, name string) {
	s.RegisterService(&grpc.ServiceDesc{
		ServiceName: "meshbridge.example.Echo",
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{{
			MethodName: "Whoami",
			Handler: func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
				var in wrapperspb.StringValue
				if err := dec(&in); err != nil {
					return nil, err
				}
				return wrapperspb.String(name), nil
			},
		}},
	}, struct{}{})
}

// Whoami calls the service and returns the backend's name.
func Whoami(ctx context.Context, cc grpc.ClientConnInterface) (string, error) {
	out := new(wrapperspb.StringValue)
	if err := cc.Invoke(ctx, Method, wrapperspb.String("hello"), out); err != nil {
		return "", err
	}
	return out.GetValue(), nil
}

// Bootstrap returns a gRPC xDS bootstrap (the file GRPC_XDS_BOOTSTRAP names)
// for a client of the xDS server at address. The node's GENERATOR "grpc"
// metadata makes meshbridge, like istiod, serve it Listeners and Routes.
func Bootstrap(address, nodeID string) ([]byte, error) {
	return json.MarshalIndent(map[string]any{
		"xds_servers": []any{map[string]any{
			"server_uri":      address,
			"channel_creds":   []any{map[string]any{"type": "insecure"}},
			"server_features": []string{"xds_v3"},
		}},
		"node": map[string]any{
			"id":       nodeID,
			"metadata": map[string]any{"GENERATOR": "grpc"},
		},
	}, "", "  ")
}
