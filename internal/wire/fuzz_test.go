package wire

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
	networking "istio.io/api/networking/v1"
)

// The shared fuzz suite of the encoders: each input drives a generator that
// fills a WorkloadEntry and a ServiceEntry by walking their descriptors
// (every field the linked istio.io/api has, so a new field is exercised
// without this file knowing it), and random ClusterLoadAssignment inputs;
// each encoder must match its reference or decline.

// FuzzEncoders runs every encoder on one generated input.
func FuzzEncoders(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x00\x00\x00\x00\x00\x00\xff\xff\xff\xff\xff\xff\xff\xff"))
	f.Add(bytes.Repeat([]byte{0x80}, 64))
	f.Add([]byte("r1/z1/s1 10.0.0.1:80 weight 4294967295 \xff\xfe <>&\u2028"))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkRandom(t, rand.New(&bytesSource{data: data}))
	})
}

// TestEncodersOnRandomInputs is FuzzEncoders on fixed seeds, so that go
// test covers many more inputs than the fuzz corpus.
func TestEncodersOnRandomInputs(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		checkRandom(t, r)
	}
}

func checkRandom(t *testing.T, r *rand.Rand) {
	t.Helper()
	g := filler{r: r}
	we := &networking.WorkloadEntry{}
	g.message(we.ProtoReflect(), 0)
	checkWorkloadEntry(t, we)
	se := &networking.ServiceEntry{}
	g.message(se.ProtoReflect(), 0)
	checkServiceEntry(t, se)
	checkLoadAssignment(t, randomAssignment(r))
}

// filler sets random values on a message's fields by its descriptor:
// strings with every JSON escape and now and then invalid UTF-8, numbers of
// every varint size, unknown enum values, empty and long maps and lists,
// nested messages, and now and then unknown fields.
type filler struct{ r *rand.Rand }

func (g filler) message(m protoreflect.Message, depth int) {
	fields := m.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if g.r.IntN(3) == 0 {
			continue
		}
		switch {
		case fd.IsMap():
			mp := m.Mutable(fd).Map()
			for range g.count() {
				v := mp.NewValue()
				if fd.MapValue().Message() != nil {
					g.message(v.Message(), depth+1)
				} else {
					v = g.scalar(fd.MapValue())
				}
				mp.Set(g.scalar(fd.MapKey()).MapKey(), v)
			}
		case fd.IsList():
			l := m.Mutable(fd).List()
			for range g.count() {
				if fd.Message() != nil {
					if depth < 3 {
						e := l.NewElement()
						g.message(e.Message(), depth+1)
						l.Append(e)
					}
					continue
				}
				l.Append(g.scalar(fd))
			}
		case fd.Message() != nil:
			if depth < 3 {
				g.message(m.Mutable(fd).Message(), depth+1)
			}
		default:
			m.Set(fd, g.scalar(fd))
		}
	}
	if g.r.IntN(50) == 0 {
		m.SetUnknown(protowire.AppendVarint(protowire.AppendTag(nil, 999, protowire.VarintType), 1))
	}
}

func (g filler) count() int {
	if g.r.IntN(10) == 0 {
		return 10 + g.r.IntN(20)
	}
	return g.r.IntN(4)
}

func (g filler) scalar(fd protoreflect.FieldDescriptor) protoreflect.Value {
	switch fd.Kind() {
	case protoreflect.StringKind:
		return protoreflect.ValueOfString(g.string())
	case protoreflect.BytesKind:
		return protoreflect.ValueOfBytes([]byte(g.string()))
	case protoreflect.BoolKind:
		return protoreflect.ValueOfBool(g.r.IntN(2) == 0)
	case protoreflect.EnumKind:
		values := fd.Enum().Values()
		if g.r.IntN(20) == 0 {
			return protoreflect.ValueOfEnum(protoreflect.EnumNumber(100 + g.r.IntN(5)))
		}
		return protoreflect.ValueOfEnum(values.Get(g.r.IntN(values.Len())).Number())
	case protoreflect.Uint32Kind, protoreflect.Fixed32Kind:
		return protoreflect.ValueOfUint32(g.uint32())
	case protoreflect.Int32Kind, protoreflect.Sint32Kind, protoreflect.Sfixed32Kind:
		return protoreflect.ValueOfInt32(int32(g.uint32()))
	case protoreflect.Uint64Kind, protoreflect.Fixed64Kind:
		return protoreflect.ValueOfUint64(g.r.Uint64() >> g.r.IntN(64))
	case protoreflect.Int64Kind, protoreflect.Sint64Kind, protoreflect.Sfixed64Kind:
		return protoreflect.ValueOfInt64(int64(g.r.Uint64() >> g.r.IntN(64)))
	case protoreflect.FloatKind:
		return protoreflect.ValueOfFloat32(float32(g.r.NormFloat64()))
	case protoreflect.DoubleKind:
		return protoreflect.ValueOfFloat64(g.r.NormFloat64())
	}
	panic("no value for kind " + fd.Kind().String())
}

func (g filler) uint32() uint32 {
	switch g.r.IntN(6) {
	case 0:
		return 0
	case 1:
		return math.MaxUint32
	}
	return g.r.Uint32() >> g.r.IntN(32)
}

// string is empty, plain, escaped for JSON (both protojson's and
// encoding/json's escapes), non-ASCII, long, or now and then invalid UTF-8.
func (g filler) string() string {
	switch g.r.IntN(12) {
	case 0:
		return ""
	case 1:
		return "\"\\\b\f\n\r\t\x00\x1f<>&\u2028\u2029"
	case 2:
		return "région/zöne/日本"
	case 3:
		return strings.Repeat("x", 100+g.r.IntN(300))
	case 4:
		if g.r.IntN(4) == 0 {
			b := make([]byte, 1+g.r.IntN(5))
			for i := range b {
				b[i] = byte(g.r.Uint32())
			}
			return string(b)
		}
	}
	return []string{"10.0.0.1", "a.example.com", "grpc-8080", "v1", "dc1/zone-a", "spiffe://x/ns/y/sa/z"}[g.r.IntN(6)]
}

// bytesSource is a rand.Source that reads the fuzzer's bytes, then goes on
// from a generator seeded by them.
type bytesSource struct {
	data []byte
	rest *rand.PCG
}

func (s *bytesSource) Uint64() uint64 {
	if len(s.data) >= 8 {
		v := binary.LittleEndian.Uint64(s.data)
		s.data = s.data[8:]
		return v
	}
	if s.rest == nil {
		var tail [8]byte
		copy(tail[:], s.data)
		s.rest = rand.NewPCG(binary.LittleEndian.Uint64(tail[:]), uint64(len(s.data)))
		s.data = nil
	}
	return s.rest.Uint64()
}
