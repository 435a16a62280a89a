package main

import (
	"context"
	"time"

	"dubbo.apache.org/dubbo-go/v3/common"
	"dubbo.apache.org/dubbo-go/v3/common/constant"
	triple "dubbo.apache.org/dubbo-go/v3/protocol/triple/triple_protocol"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

// TripleGreetService serves GreetService over Triple. dubbo-go lists its
// exported methods in the provider URL's methods parameter; the handlers
// come from tripleGreetServiceInfo. Its type name must be exported: dubbo-go
// refuses a service whose type is not.
type TripleGreetService struct {
	from  string        // "app@127.0.0.1:port"
	delay time.Duration // before each Greet answer (-greet-delay)
}

func (s *TripleGreetService) Greet(ctx context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return wrapperspb.String("hello " + in.GetValue() + " from " + s.from), nil
}

func (s *TripleGreetService) Hello(_ context.Context, in *wrapperspb.StringValue) (*wrapperspb.StringValue, error) {
	return wrapperspb.String("hi " + in.GetValue() + " from " + s.from), nil
}

// tripleGreetServiceInfo is what protoc-gen-go-triple generates for
//
//	service GreetService {
//	  rpc Greet(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	  rpc Hello(google.protobuf.StringValue) returns (google.protobuf.StringValue);
//	}
//
// with iface as the service's full name: Triple serves each method at
// /<iface>/<Name>.
func tripleGreetServiceInfo(iface string) *common.ServiceInfo {
	return &common.ServiceInfo{
		InterfaceName: iface,
		ServiceType:   (*TripleGreetService)(nil),
		Methods: []common.MethodInfo{
			tripleUnary("Greet", (*TripleGreetService).Greet),
			tripleUnary("Hello", (*TripleGreetService).Hello),
		},
	}
}

func tripleUnary(name string, call func(*TripleGreetService, context.Context, *wrapperspb.StringValue) (*wrapperspb.StringValue, error)) common.MethodInfo {
	return common.MethodInfo{
		Name:        name,
		Type:        constant.CallUnary,
		ReqInitFunc: func() any { return new(wrapperspb.StringValue) },
		MethodFunc: func(ctx context.Context, args []any, handler any) (any, error) {
			res, err := call(handler.(*TripleGreetService), ctx, args[0].(*wrapperspb.StringValue))
			if err != nil {
				return nil, err
			}
			return triple.NewResponse(res), nil
		},
	}
}

// DubboGreetService serves GreetService over the Dubbo protocol (hessian2):
// a string in, a string out. dubbo-go finds its methods by reflection.
type DubboGreetService struct {
	from string // "app@127.0.0.1:port"
}

func (s *DubboGreetService) Greet(_ context.Context, name string) (string, error) {
	return "hello " + name + " from " + s.from, nil
}

func (s *DubboGreetService) Hello(_ context.Context, name string) (string, error) {
	return "hi " + name + " from " + s.from, nil
}
