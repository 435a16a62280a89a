package gen

import (
	"sync/atomic"

	"github.com/envoyproxy/go-control-plane/pkg/cache/types"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/runtime/protoiface"
)

// Encoded is an xDS resource held as its encoding, which is all the
// caches keep of it: a ClusterLoadAssignment assembled from pre-encoded
// LbEndpoints (LoadAssignments), or a Cluster, Listener or
// RouteConfiguration marshalled once when generated (Encode). Marshalling it
// (proto.Marshal, deterministic or not, which is how go-control-plane's
// cache.MarshalResource encodes each resource version once) returns the
// encoding itself, shared, without a copy; callers must not modify it.
// Everything else the proto API does with it (proto.Equal, Clone,
// protojson, a reflective marshal under the protoreflect build tag) goes
// through the message decoded from the encoding on first use. It is
// read-only: the reflective setters panic.
type Encoded struct {
	name string
	wire []byte
	typ  protoreflect.MessageType
	// decoded is the message, once a reflective use decoded it; nil
	// until then (64 bytes per resource, not the 96 a sync.Once and an
	// interface would take).
	decoded atomic.Pointer[proto.Message]
}

var _ types.ResourceWithName = (*Encoded)(nil)

// encodeResource returns m, named name, as an Encoded holding its
// deterministic encoding (the bytes proto.Marshal gives for m, which the
// cache serves).
// When m cannot be marshalled it returns m itself, so the cache's marshal
// fails as it would for m.
func Encode(name string, m proto.Message) types.Resource {
	wire, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return m
	}
	return &Encoded{name: name, wire: wire, typ: m.ProtoReflect().Type()}
}

// ProtoReflect returns the message's reflective view; it allocates nothing.
func (e *Encoded) ProtoReflect() protoreflect.Message { return (*encodedView)(e) }

// GetName is the resource name (go-control-plane's cache.GetResourceName).
func (e *Encoded) GetName() string { return e.name }

// Encoding returns the encoding, shared: read-only. The xDS caches keep
// it instead of marshalling the resource (xds/cache).
func (e *Encoded) Encoding() []byte { return e.wire }

// message returns the decoded message. Concurrent first uses may each
// decode; one result is kept.
func (e *Encoded) message() proto.Message {
	if m := e.decoded.Load(); m != nil {
		return *m
	}
	m := e.typ.New().Interface()
	if err := proto.Unmarshal(e.wire, m); err != nil {
		panic("gen: a pre-encoded " + string(e.typ.Descriptor().FullName()) + " does not decode: " + err.Error())
	}
	e.decoded.CompareAndSwap(nil, &m)
	return *e.decoded.Load()
}

// encodedView is Encoded's protoreflect.Message: its fast-path
// methods marshal the encoding; reads go to the decoded message.
type encodedView Encoded

var encodedMethods = &protoiface.Methods{
	Flags: protoiface.SupportMarshalDeterministic,
	Marshal: func(in protoiface.MarshalInput) (protoiface.MarshalOutput, error) {
		wire := in.Message.(*encodedView).wire
		if in.Buf == nil {
			return protoiface.MarshalOutput{Buf: wire[:len(wire):len(wire)]}, nil
		}
		return protoiface.MarshalOutput{Buf: append(in.Buf, wire...)}, nil
	},
	// proto3: no required fields.
	CheckInitialized: func(protoiface.CheckInitializedInput) (protoiface.CheckInitializedOutput, error) {
		return protoiface.CheckInitializedOutput{}, nil
	},
}

func (v *encodedView) read() protoreflect.Message {
	return (*Encoded)(v).message().ProtoReflect()
}

func (v *encodedView) readOnly() {
	panic("gen: a pre-encoded " + string(v.typ.Descriptor().FullName()) + " is read-only")
}

func (v *encodedView) Descriptor() protoreflect.MessageDescriptor { return v.typ.Descriptor() }
func (v *encodedView) Type() protoreflect.MessageType             { return v.typ }
func (v *encodedView) New() protoreflect.Message                  { return v.typ.New() }
func (v *encodedView) Interface() protoreflect.ProtoMessage       { return (*Encoded)(v) }
func (v *encodedView) Range(f func(protoreflect.FieldDescriptor, protoreflect.Value) bool) {
	v.read().Range(f)
}
func (v *encodedView) Has(fd protoreflect.FieldDescriptor) bool { return v.read().Has(fd) }
func (v *encodedView) Clear(protoreflect.FieldDescriptor)       { v.readOnly() }
func (v *encodedView) Get(fd protoreflect.FieldDescriptor) protoreflect.Value {
	return v.read().Get(fd)
}
func (v *encodedView) Set(protoreflect.FieldDescriptor, protoreflect.Value) { v.readOnly() }
func (v *encodedView) Mutable(protoreflect.FieldDescriptor) protoreflect.Value {
	v.readOnly()
	return protoreflect.Value{}
}
func (v *encodedView) NewField(fd protoreflect.FieldDescriptor) protoreflect.Value {
	return v.read().NewField(fd)
}
func (v *encodedView) WhichOneof(od protoreflect.OneofDescriptor) protoreflect.FieldDescriptor {
	return v.read().WhichOneof(od)
}
func (v *encodedView) GetUnknown() protoreflect.RawFields { return v.read().GetUnknown() }
func (v *encodedView) SetUnknown(protoreflect.RawFields)  { v.readOnly() }
func (v *encodedView) IsValid() bool                      { return v != nil }
func (v *encodedView) ProtoMethods() *protoiface.Methods  { return encodedMethods }
