package ads

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/internal/wire"
)

// codecCase is one shared response: its inputs, its encoding and the
// message it encodes (without a nonce).
type codecCase struct {
	delta        bool
	version, typ string
	values       [][]byte // SotW
	resources    []wire.DeltaResource
	removed      []string
	resp         *wire.Response
}

// message returns the go-control-plane message the case encodes, with
// nonce, built afresh (its Anys share the case's value bytes).
func (c *codecCase) message(nonce string) proto.Message {
	if c.delta {
		m := &discovery.DeltaDiscoveryResponse{SystemVersionInfo: c.version, TypeUrl: c.typ, RemovedResources: c.removed, Nonce: nonce}
		for _, r := range c.resources {
			m.Resources = append(m.Resources, &discovery.Resource{Name: r.Name, Version: r.Version,
				Resource: &anypb.Any{TypeUrl: c.typ, Value: r.Value}})
		}
		return m
	}
	m := &discovery.DiscoveryResponse{VersionInfo: c.version, TypeUrl: c.typ, Nonce: nonce}
	for _, v := range c.values {
		m.Resources = append(m.Resources, &anypb.Any{TypeUrl: c.typ, Value: v})
	}
	return m
}

// codecRandomCase returns a random response of about size bytes of values
// (windows of pool), with empty strings, values and lists now and then.
func codecRandomCase(r *rand.Rand, pool []byte, delta bool, size int) *codecCase {
	c := &codecCase{delta: delta}
	c.version = []string{"", "1", "2024-06-01T00:00:00Z/" + strconv.Itoa(r.IntN(1000)), "vérsion"}[r.IntN(4)]
	c.typ = []string{"", "type.googleapis.com/envoy.config.cluster.v3.Cluster",
		"type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"}[r.IntN(3)]
	for size > 0 {
		n := min(size, r.IntN(2*size+1), 1+r.IntN(100_000))
		if r.IntN(10) == 0 {
			n = 0
		}
		size -= max(n, 1)
		start := r.IntN(len(pool) - n)
		v := pool[start : start+n]
		if delta {
			name := []string{"", "ü/" + strconv.Itoa(r.IntN(100)), "outbound|80||svc-" + strconv.Itoa(r.IntN(1000)) + ".ns.svc.cluster.local"}[r.IntN(3)]
			c.resources = append(c.resources, wire.DeltaResource{Name: name, Version: strconv.Itoa(r.IntN(10)), Value: v})
		} else {
			c.values = append(c.values, v)
		}
	}
	if delta {
		switch r.IntN(3) {
		case 0:
		case 1:
			c.removed = []string{}
		default:
			for range 1 + r.IntN(4) {
				c.removed = append(c.removed, []string{"", "gone-" + strconv.Itoa(r.IntN(100)), "ñ"}[r.IntN(3)])
			}
		}
		c.resp = wire.DeltaResponse(c.version, c.typ, c.resources, c.removed)
	} else {
		c.resp = wire.SotWResponse(c.version, c.typ, c.values)
	}
	return c
}

// codecPool returns n random bytes, the values' source.
func codecPool(r *rand.Rand, n int) []byte {
	pool := make([]byte, n)
	for i := range pool {
		pool[i] = byte(r.Uint32())
	}
	return pool
}

// TestCodecMarshalMatchesProto: a *Message's bytes are proto.Marshal's of
// the message it stands for, and its head is the Response's, not a copy.
func TestCodecMarshalMatchesProto(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	pool := codecPool(r, 1<<18)
	for i := range 500 {
		size := []int{0, 10, 200, 5000, 20000, 150_000}[r.IntN(6)]
		c := codecRandomCase(r, pool, r.IntN(2) == 0, size)
		nonce := []string{"", "1", strconv.FormatUint(r.Uint64(), 10), "nönce"}[r.IntN(4)]
		want, err := proto.Marshal(c.message(nonce))
		if err != nil {
			t.Fatal(err)
		}
		data, err := Codec{}.Marshal(NewMessage(c.resp, nonce))
		if err != nil {
			t.Fatalf("%d: Marshal: %v", i, err)
		}
		if got := data.Materialize(); !bytes.Equal(got, want) {
			t.Fatalf("%d: Marshal(Message) = %x\nwant proto.Marshal's %x", i, got, want)
		}
		head, _ := c.resp.Parts(nonce)
		if len(head) > 0 && &data[0].ReadOnlyData()[0] != &head[0] {
			t.Fatalf("%d: Marshal copied the shared head", i)
		}
		data.Free() // as grpc-go does after writing: must not release the shared head
		if got, _ := (Codec{}).Marshal(NewMessage(c.resp, nonce)); !bytes.Equal(got.Materialize(), want) {
			t.Fatalf("%d: after Free, Marshal(Message) = %x\nwant %x", i, got.Materialize(), want)
		}
	}
}

// TestCodecMarshalAllocs: a *Message costs the nonce's buffer and one
// frame (the BufferSlice and its buffers).
func TestCodecMarshalAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	pool := codecPool(r, 1<<16)
	for _, delta := range []bool{false, true} {
		c := codecRandomCase(r, pool, delta, 20000)
		m := NewMessage(c.resp, "12345")
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := (Codec{}).Marshal(m); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("delta %v: %v allocations per Marshal", delta, allocs)
		if allocs > 2 {
			t.Errorf("delta %v: %v allocations per Marshal, want at most 2", delta, allocs)
		}
	}
}

// TestCodecRefuses: what the proto codec would refuse, or cannot be sent.
func TestCodecRefuses(t *testing.T) {
	resp := wire.SotWResponse("1", "t", nil)
	for _, v := range []any{(*Message)(nil), NewMessage(nil, "1"), NewMessage(resp, "n\xff"), "not a message", nil} {
		if _, err := (Codec{}).Marshal(v); err == nil {
			t.Errorf("Marshal(%#v) succeeded", v)
		}
	}
	if name := (Codec{}).Name(); name != "proto" {
		t.Errorf("Name() = %q, want proto", name)
	}
}

// TestCodecUnmarshalRequest: requests (and any other message) go through
// the proto codec both ways.
func TestCodecUnmarshalRequest(t *testing.T) {
	req := &discovery.DiscoveryRequest{
		VersionInfo: "3", Node: &core.Node{Id: "sidecar~10.0.0.1~a.ns~ns.svc.cluster.local", Cluster: "c"},
		ResourceNames: []string{"a", "ü"}, TypeUrl: "type.googleapis.com/envoy.config.cluster.v3.Cluster", ResponseNonce: "7",
	}
	data, err := Codec{}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := proto.Marshal(req); !bytes.Equal(data.Materialize(), want) {
		t.Errorf("Marshal(request) = %x, want %x", data.Materialize(), want)
	}
	var got discovery.DiscoveryRequest
	if err := (Codec{}).Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(&got, req) {
		t.Errorf("round trip gave %v, want %v", &got, req)
	}

	// Split across buffers, as a request read from several frames is.
	raw, _ := proto.Marshal(req)
	split := mem.BufferSlice{mem.SliceBuffer(raw[:5]), mem.SliceBuffer(raw[5:17]), mem.SliceBuffer(raw[17:])}
	got.Reset()
	if err := (Codec{}).Unmarshal(split, &got); err != nil || !proto.Equal(&got, req) {
		t.Errorf("split request: %v, %v", &got, err)
	}

	deltaReq := &discovery.DeltaDiscoveryRequest{Node: req.Node, TypeUrl: req.TypeUrl, ResourceNamesSubscribe: []string{"x"}}
	deltaRaw, _ := proto.Marshal(deltaReq)
	var delta discovery.DeltaDiscoveryRequest
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(deltaRaw)}, &delta); err != nil || !proto.Equal(&delta, deltaReq) {
		t.Errorf("delta request: %v, %v", &delta, err)
	}
	if err := (Codec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer{0xff}}, &got); err == nil {
		t.Error("Unmarshal of garbage succeeded")
	}
	if err := (Codec{}).Unmarshal(data, new(Message)); err == nil {
		t.Error("Unmarshal into a Message succeeded")
	}
}

// The shape of TestCodecConcurrentStreams: connections × streams per
// connection, each stream receiving codecSends responses.
const (
	codecConns     = 8
	codecStreams   = 16
	codecSends     = 24
	codecResponses = 48
)

// codecADS is an ADS server that sends each stream the responses
// codecSchedule gives: shared *Message values and plain messages
// (marshalled by grpc-go into its pooled buffers), interleaved.
type codecADS struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	sotw, delta []*codecCase
}

// codecSchedule returns the k-th response of stream id: the case's index,
// whether the server sends it as a plain message, and its nonce (empty
// for the first).
func codecSchedule(id, k int) (index int, plain bool, nonce string) {
	index = (id*7 + k*5 + k*k) % codecResponses
	plain = (id+k)%3 == 0
	if k > 0 {
		nonce = strconv.Itoa(id) + "/" + strconv.Itoa(k)
	}
	return index, plain, nonce
}

func (s *codecADS) StreamAggregatedResources(stream discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	id, err := strconv.Atoi(req.GetNode().GetId())
	if err != nil {
		return err
	}
	for k := range codecSends {
		i, plain, nonce := codecSchedule(id, k)
		if plain {
			err = stream.Send(s.sotw[i].message(nonce).(*discovery.DiscoveryResponse))
		} else {
			err = stream.SendMsg(NewMessage(s.sotw[i].resp, nonce))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *codecADS) DeltaAggregatedResources(stream discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	req, err := stream.Recv()
	if err != nil {
		return err
	}
	id, err := strconv.Atoi(req.GetNode().GetId())
	if err != nil {
		return err
	}
	for k := range codecSends {
		i, plain, nonce := codecSchedule(id, k)
		if plain {
			err = stream.Send(s.delta[i].message(nonce).(*discovery.DeltaDiscoveryResponse))
		} else {
			err = stream.SendMsg(NewMessage(s.delta[i].resp, nonce))
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// TestCodecConcurrentStreams: no reused buffer can ever serve another
// list's bytes. A real grpc-go server with Codec sends, on many streams of
// many connections at once, shared responses (the same heads on many
// streams, each with its own nonce; some of 64 KiB and more, so that flow
// control interleaves their frames) between plain messages, which grpc-go
// marshals into pooled buffers and frees after writing; every client
// (default codec) must receive exactly the messages it was sent. Run with
// -race.
func TestCodecConcurrentStreams(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	pool := codecPool(r, 1<<19)
	ads := &codecADS{}
	for i := range codecResponses {
		size := []int{0, 100, 1000, 4000, 16000}[r.IntN(5)]
		if i%4 == 0 {
			size = 64<<10 + r.IntN(128<<10)
		}
		ads.sotw = append(ads.sotw, codecRandomCase(r, pool, false, size))
		ads.delta = append(ads.delta, codecRandomCase(r, pool, true, size))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(Codec{}))
	discovery.RegisterAggregatedDiscoveryServiceServer(srv, ads)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(lis) }()
	defer func() {
		srv.Stop()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()

	var wg sync.WaitGroup
	for c := range codecConns {
		conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		client := discovery.NewAggregatedDiscoveryServiceClient(conn)
		for s := range codecStreams {
			id := c*codecStreams + s
			wg.Go(func() {
				var err error
				if id%2 == 0 {
					err = codecReceiveSotW(ctx, client, id, ads.sotw)
				} else {
					err = codecReceiveDelta(ctx, client, id, ads.delta)
				}
				if err != nil {
					t.Errorf("stream %d: %v", id, err)
				}
			})
		}
	}
	wg.Wait()
}

// codecReceiveSotW opens SotW stream id and checks every response it
// receives against the schedule.
func codecReceiveSotW(ctx context.Context, client discovery.AggregatedDiscoveryServiceClient, id int, cases []*codecCase) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.StreamAggregatedResources(ctx)
	if err != nil {
		return err
	}
	return codecReceive(stream, &discovery.DiscoveryRequest{Node: &core.Node{Id: strconv.Itoa(id)}}, id, cases)
}

// codecReceiveDelta is codecReceiveSotW for a delta stream.
func codecReceiveDelta(ctx context.Context, client discovery.AggregatedDiscoveryServiceClient, id int, cases []*codecCase) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := client.DeltaAggregatedResources(ctx)
	if err != nil {
		return err
	}
	return codecReceive(stream, &discovery.DeltaDiscoveryRequest{Node: &core.Node{Id: strconv.Itoa(id)}}, id, cases)
}

// codecResponse is a SotW or Delta response.
type codecResponse interface {
	proto.Message
	GetNonce() string
}

// codecReceive sends first on stream id, then checks every response it
// receives against the schedule and that the stream ends after the last.
func codecReceive[Req any, Resp codecResponse](stream interface {
	Send(Req) error
	Recv() (Resp, error)
}, first Req, id int, cases []*codecCase) error {
	if err := stream.Send(first); err != nil {
		return err
	}
	for k := range codecSends {
		got, err := stream.Recv()
		if err != nil {
			return fmt.Errorf("response %d: %w", k, err)
		}
		if err := codecCheck(got, got.GetNonce(), id, k, cases); err != nil {
			return err
		}
	}
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the last response: %v, want EOF", err)
	}
	return nil
}

// codecCheck checks the k-th response of stream id against the schedule.
func codecCheck(got proto.Message, gotNonce string, id, k int, cases []*codecCase) error {
	i, plain, nonce := codecSchedule(id, k)
	if gotNonce != nonce {
		return fmt.Errorf("response %d (case %d, plain %v) has nonce %q, want %q", k, i, plain, gotNonce, nonce)
	}
	if want := cases[i].message(nonce); !proto.Equal(got, want) {
		g, _ := proto.Marshal(got)
		w, _ := proto.Marshal(want)
		return fmt.Errorf("response %d (case %d, plain %v) differs: %d bytes, want %d (equal: %v)", k, i, plain, len(g), len(w), bytes.Equal(g, w))
	}
	return nil
}

// BenchmarkCodecMarshal is the codec's cost of sending a shared response
// on one stream.
func BenchmarkCodecMarshal(b *testing.B) {
	r := rand.New(rand.NewPCG(13, 14))
	pool := codecPool(r, 1<<16)
	for _, delta := range []bool{false, true} {
		c := codecRandomCase(r, pool, delta, 20000)
		b.Run(fmt.Sprint("delta=", delta), func(b *testing.B) {
			b.ReportAllocs()
			m := NewMessage(c.resp, "12345")
			for b.Loop() {
				data, err := Codec{}.Marshal(m)
				if err != nil {
					b.Fatal(err)
				}
				data.Free()
			}
		})
	}
}
