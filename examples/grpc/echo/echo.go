// Package echo is the example gRPC service of meshbridge's demo and e2e tests:
// one method, meshbridge.example.Echo/Whoami, that answers with the serving
// backend's name. It uses well-known wrapper messages, so it needs no
// generated code; echo.proto declares the same service for clients in other
// languages.
package echo

import (
	"bytes"
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/meshbridge/meshbridge/xds/bootstrap"
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
			Handler: func(_ any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
				var in wrapperspb.StringValue
				if err := dec(&in); err != nil {
					return nil, err
				}
				answer := func(context.Context, any) (any, error) { return wrapperspb.String(name), nil }
				if interceptor == nil {
					return answer(ctx, &in)
				}
				return interceptor(ctx, &in, &grpc.UnaryServerInfo{FullMethod: Method}, answer)
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
// for a client of the xDS server at address, plaintext, with no locality:
// the document `meshbridge bootstrap --node-id nodeID --xds-address address`
// prints (package xds/bootstrap), less its final newline.
func Bootstrap(address, nodeID string) ([]byte, error) {
	b, err := bootstrap.Render(bootstrap.Config{ServerURI: address, NodeID: nodeID})
	return bytes.TrimSuffix(b, []byte("\n")), err
}
