package ads

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
	"unsafe"

	"google.golang.org/grpc/encoding"
	_ "google.golang.org/grpc/encoding/proto" // registers the "proto" codec Codec delegates to
	"google.golang.org/grpc/mem"

	"github.com/meshbridge/meshbridge/internal/wire"
)

// Message is one stream's response: a wire.Response shared by every stream
// it goes to, and this stream's nonce. Codec sends it without marshalling;
// pass it to the stream's SendMsg.
//
// A Message is sent once: Codec builds its BufferSlice in the Message
// itself (frame, and rest for a nonce field with no fields after it), so
// a send allocates the Message and nothing else.
type Message struct {
	resp  *wire.Response
	nonce string
	frame codecFrame
	// digits holds a numbered Message's nonce (numbered), rest the nonce
	// field and the fields after it when they fit.
	digits [20]byte
	rest   [24]byte
}

// NewMessage returns the message resp with nonce (valid UTF-8, or Codec
// refuses to send it, as the proto codec refuses such a string).
func NewMessage(resp *wire.Response, nonce string) *Message {
	return &Message{resp: resp, nonce: nonce}
}

// numbered returns the message resp with nonce n in decimal, held in the
// Message (one allocation for both).
func numbered(resp *wire.Response, n uint64) *Message {
	m := &Message{resp: resp}
	d := strconv.AppendUint(m.digits[:0], n, 10)
	m.nonce = unsafe.String(&m.digits[0], len(d))
	return m
}

// Nonce returns the message's nonce.
func (m *Message) Nonce() string { return m.nonce }

// Codec is the ADS server's gRPC codec (an encoding.CodecV2 named "proto",
// the content-subtype xDS clients use; a bare application/grpc means
// proto too), installed with
// grpc.ForceServerCodecV2(Codec{}); it must not be registered with
// encoding.RegisterCodecV2, as it delegates to the registered "proto"
// codec. A *Message is sent as its pre-encoded bytes without a marshal:
// the response's shared head, not copied, then the stream's nonce and the
// fields after it (wire.Response.Parts). Any other message is marshalled
// and unmarshalled by the registered "proto" codec, as without Codec.
//
// The buffers of a *Message do not come from a pool: grpc-go frees a
// message's buffers once it has written them, and a pooled buffer holding
// a shared head would be reused while other streams still send the head.
// The buffers are *mem.SliceBuffer: mem.SliceBuffer's Free does nothing.
type Codec struct{}

// codecProtoName is the name of the default codec, and Codec's.
const codecProtoName = "proto"

// codecFrame holds a *Message's BufferSlice and its two buffers in one
// allocation: the slice's interfaces point at the buffers beside them
// instead of each boxing a slice header of its own.
type codecFrame struct {
	bufs       [2]mem.Buffer
	head, rest mem.SliceBuffer
}

// Marshal returns a *Message's bytes (no allocation when its nonce field
// and the fields after it fit the Message's rest, else one), and any
// other message marshalled by the "proto" codec.
func (Codec) Marshal(v any) (mem.BufferSlice, error) {
	m, ok := v.(*Message)
	if !ok {
		proto, err := codecDefault()
		if err != nil {
			return nil, err
		}
		return proto.Marshal(v)
	}
	if m == nil || m.resp == nil {
		return nil, errors.New("ads: marshal of a Message without a response")
	}
	if !utf8.ValidString(m.nonce) {
		return nil, fmt.Errorf("ads: marshal of a Message whose nonce %q is not valid UTF-8", m.nonce)
	}
	head, rest := m.resp.Head(), m.resp.AppendRest(m.rest[:0], m.nonce)
	f := &m.frame
	f.head, f.rest = head, rest
	n := 0
	if len(head) > 0 {
		f.bufs[n] = &f.head
		n++
	}
	if len(rest) > 0 {
		f.bufs[n] = &f.rest
		n++
	}
	return f.bufs[:n:n], nil
}

// Unmarshal unmarshals data into v with the "proto" codec.
func (Codec) Unmarshal(data mem.BufferSlice, v any) error {
	proto, err := codecDefault()
	if err != nil {
		return err
	}
	return proto.Unmarshal(data, v)
}

// Name returns "proto": clients send, and expect, the proto
// content-subtype.
func (Codec) Name() string {
	return codecProtoName
}

// codecDefault returns the registered "proto" codec: grpc-go's own, or one
// registered in its place at init time.
func codecDefault() (encoding.CodecV2, error) {
	switch c := encoding.GetCodecV2(codecProtoName).(type) {
	case nil:
		return nil, errors.New(`ads: no "proto" codec registered`)
	case Codec, *Codec:
		return nil, errors.New(`ads: Codec is registered as the "proto" codec it delegates to`)
	default:
		return c, nil
	}
}
