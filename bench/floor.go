package main

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	core "github.com/envoyproxy/go-control-plane/envoy/config/core/v3"
	endpoint "github.com/envoyproxy/go-control-plane/envoy/config/endpoint/v3"
	discovery "github.com/envoyproxy/go-control-plane/envoy/service/discovery/v3"
	resourcev3 "github.com/envoyproxy/go-control-plane/pkg/resource/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/meshbridge/meshbridge/xds"
)

// P2's floor: a bare grpc-go ADS server (SotW and Delta) in the suite's
// process that does the least a grpc-go server can do for P2's change. Per
// round it encodes the changed ClusterLoadAssignment once and the head of
// a DiscoveryResponse and of a DeltaDiscoveryResponse holding it (the
// bridge's own responses with that CLA, captured after its P2 run, so the
// same size), and sends every watching stream that head followed by the
// stream's nonce (field 5, the only per-stream part) through a
// pass-through codec, then reads the stream's ACK. The same client process
// and the same measurements as the bridge's P2 rounds (p2Rounds) make the
// bridge's CPU per watching stream a ratio to it.

// encodedMessage is a message encoded already: the pass-through codec
// sends its buffers as they are.
type encodedMessage struct{ bufs mem.BufferSlice }

// rawRequest is a received request's encoding, read by the floor without
// unmarshalling it; its buffer is reused.
type rawRequest struct{ b []byte }

// passThroughCodec is the floor's codec (grpc.ForceServerCodecV2): an
// encodedMessage is sent as its buffers (non-pooled mem.SliceBuffers, so
// grpc's Free after the write does nothing), a rawRequest receives the
// bytes as they came; everything else is the proto codec's.
type passThroughCodec struct{ proto encoding.CodecV2 }

func newPassThroughCodec() passThroughCodec {
	return passThroughCodec{proto: encoding.GetCodecV2("proto")}
}

func (c passThroughCodec) Marshal(v any) (mem.BufferSlice, error) {
	if m, ok := v.(*encodedMessage); ok {
		return m.bufs, nil
	}
	return c.proto.Marshal(v)
}

func (c passThroughCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(*rawRequest); ok {
		m.b = m.b[:0]
		for _, b := range data {
			m.b = append(m.b, b.ReadOnlyData()...)
		}
		return nil
	}
	return c.proto.Unmarshal(data, v)
}

func (passThroughCodec) Name() string { return "proto" }

// nonceLen is the length of a floor nonce: 8 hex digits, the stream's ID
// (high 16 bits) and its count of sends (low 16 bits): unique per stream
// and send, and about the size of the bridge's (a per-stream counter).
const nonceLen = 8

// nonceOf is the nonce of a stream's send.
func nonceOf(id, sent uint32) uint64 { return uint64(id&0xffff)<<16 | uint64(sent&0xffff) }

// floor is the bare ADS server.
type floor struct {
	discovery.UnimplementedAggregatedDiscoveryServiceServer
	srv *grpc.Server
	lis net.Listener
	// senders: 0, each stream's handler sends its responses; N, a pool of
	// N goroutines does. decode: ACKs are unmarshalled (proto) rather than
	// read raw.
	senders int
	decode  bool

	watch string
	cla   *endpoint.ClusterLoadAssignment // the changing one
	// addrs are the two addresses its first endpoint takes in turn, of
	// the same length, so every round's CLA has the bridge's size.
	addrs [2]string
	sotw  *discovery.DiscoveryResponse // the bridge's, the template of the heads
	delta *discovery.DeltaDiscoveryResponse
	cur   atomic.Pointer[floorRound]

	ids      atomic.Uint32
	bad      atomic.Int64 // ACKs of another nonce, NACKs, unexpected requests
	mu       sync.Mutex
	watching []*floorStream // senders > 0
}

// floorRound is one round's responses.
type floorRound struct {
	sotw, delta mem.Buffer    // the heads, encoded once
	next        chan struct{} // closed once after is set
	after       *floorRound
}

// floorStream is one stream the floor serves.
type floorStream struct {
	id    uint32
	delta bool
	ss    grpc.ServerStream
	msg   encodedMessage // head, nonce field
	nonce []byte         // the nonce field: tag, length, nonceLen digits
	sent  atomic.Uint32  // sends so far
	acked atomic.Bool    // the last send's ACK was read (its buffers are written)
	req   rawRequest
}

// startFloor serves the floor on 127.0.0.1:0 for the responses c captured
// from the bridge.
func startFloor(c *p2Capture, senders int, decode bool) (*floor, error) {
	cla := &endpoint.ClusterLoadAssignment{}
	if err := c.sotw.GetResources()[0].UnmarshalTo(cla); err != nil {
		return nil, fmt.Errorf("the bridge's ClusterLoadAssignment: %w", err)
	}
	f := &floor{senders: senders, decode: decode, watch: c.watch, cla: cla, sotw: c.sotw, delta: c.delta}
	if sa := firstAddress(cla); sa != nil && sa.Address != "" {
		other := []byte(sa.Address)
		if other[0]++; other[0] > '9' {
			other[0] = '1'
		}
		f.addrs = [2]string{sa.Address, string(other)}
	}
	f.cur.Store(f.encodeRound(0))
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f.lis = lis
	f.srv = grpc.NewServer(append(xds.TransportOptions(), grpc.ForceServerCodecV2(newPassThroughCodec()))...)
	discovery.RegisterAggregatedDiscoveryServiceServer(f.srv, f)
	go func() { _ = f.srv.Serve(lis) }()
	return f, nil
}

func (f *floor) address() string { return f.lis.Addr().String() }

func (f *floor) stop() { f.srv.Stop() }

// firstAddress is the socket address of cla's first endpoint, nil if
// none.
func firstAddress(cla *endpoint.ClusterLoadAssignment) *core.SocketAddress {
	if eps := cla.GetEndpoints(); len(eps) > 0 && len(eps[0].GetLbEndpoints()) > 0 {
		return eps[0].GetLbEndpoints()[0].GetEndpoint().GetAddress().GetSocketAddress()
	}
	return nil
}

// encodeRound moves the CLA's first endpoint to the address of round's
// parity (as the generator moves instance 0 of service 0 between 10.… and
// 11.…) and encodes it, then the heads of both responses holding it: the
// bridge's responses with that CLA, a version of round's and no nonce.
func (f *floor) encodeRound(round int) *floorRound {
	if sa := firstAddress(f.cla); sa != nil {
		sa.Address = f.addrs[round%2]
	}
	value, err := proto.MarshalOptions{Deterministic: true}.Marshal(f.cla)
	if err != nil {
		panic(err) // a decoded message encodes
	}
	res := &anypb.Any{TypeUrl: resourcev3.EndpointType, Value: value}
	sotw := proto.CloneOf(f.sotw)
	sotw.Resources[0], sotw.Nonce = res, ""
	sotw.VersionInfo = versionLike(sotw.VersionInfo, round)
	delta := proto.CloneOf(f.delta)
	delta.Resources[0].Resource, delta.Nonce = res, ""
	delta.Resources[0].Version = versionLike(delta.Resources[0].Version, round)
	if delta.SystemVersionInfo != "" {
		delta.SystemVersionInfo = versionLike(delta.SystemVersionInfo, round)
	}
	sotwHead, err := proto.Marshal(sotw)
	if err == nil {
		var deltaHead []byte
		if deltaHead, err = proto.Marshal(delta); err == nil {
			return &floorRound{sotw: mem.SliceBuffer(sotwHead), delta: mem.SliceBuffer(deltaHead), next: make(chan struct{})}
		}
	}
	panic(err)
}

// versionLike is round as a version of v's length (at least round's
// digits).
func versionLike(v string, round int) string {
	return fmt.Sprintf("%0*d", len(v), round)
}

// push makes round's change: it encodes the round's responses and has
// them sent to every watching stream. It returns the event time, taken
// before the encoding.
func (f *floor) push(round int) time.Time {
	event := time.Now()
	r := f.encodeRound(round)
	old := f.cur.Load()
	old.after = r
	f.cur.Store(r)
	close(old.next) // wakes the handlers (senders == 0)
	if f.senders > 0 {
		f.mu.Lock()
		streams := f.watching
		f.mu.Unlock()
		per := (len(streams) + f.senders - 1) / f.senders
		for part := range slices.Chunk(streams, max(1, per)) {
			go func() {
				for _, s := range part {
					_ = s.send(r) // an error ends the stream's handler
				}
			}()
		}
	}
	return event
}

func (f *floor) StreamAggregatedResources(ss discovery.AggregatedDiscoveryService_StreamAggregatedResourcesServer) error {
	req := &discovery.DiscoveryRequest{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	return f.serve(ss, false, req.GetResourceNames())
}

func (f *floor) DeltaAggregatedResources(ss discovery.AggregatedDiscoveryService_DeltaAggregatedResourcesServer) error {
	req := &discovery.DeltaDiscoveryRequest{}
	if err := ss.RecvMsg(req); err != nil {
		return err
	}
	return f.serve(ss, true, req.GetResourceNamesSubscribe())
}

// serve serves a stream whose first request subscribed to names: a stream
// of other names gets one response and then only has its ACKs read; a
// watching stream gets the current round's response, then every round's.
func (f *floor) serve(ss grpc.ServerStream, delta bool, names []string) error {
	s := &floorStream{id: f.ids.Add(1), delta: delta, ss: ss}
	s.acked.Store(true)
	s.newNonce()
	if !slices.Contains(names, f.watch) {
		if err := ss.SendMsg(otherResponse(names, delta)); err != nil {
			return err
		}
		for {
			if err := f.readAny(s); err != nil {
				return nil
			}
		}
	}
	r := f.cur.Load()
	if err := s.send(r); err != nil {
		return err
	}
	if err := f.readACK(s); err != nil {
		return nil
	}
	if f.senders > 0 {
		f.mu.Lock()
		f.watching = append(f.watching, s)
		f.mu.Unlock()
		for {
			if err := f.readACK(s); err != nil {
				return nil
			}
		}
	}
	done := ss.Context().Done()
	for {
		select {
		case <-r.next:
		case <-done:
			return nil
		}
		r = r.after
		if err := s.send(r); err != nil {
			return err
		}
		if err := f.readACK(s); err != nil {
			return nil
		}
	}
}

// otherResponse is the one response of a stream of other names: an empty
// ClusterLoadAssignment of each name, encoded by the proto codec.
func otherResponse(names []string, delta bool) any {
	if delta {
		resp := &discovery.DeltaDiscoveryResponse{TypeUrl: resourcev3.EndpointType, Nonce: "other"}
		for _, n := range names {
			a, _ := anypb.New(&endpoint.ClusterLoadAssignment{ClusterName: n})
			resp.Resources = append(resp.Resources, &discovery.Resource{Name: n, Version: "1", Resource: a})
		}
		return resp
	}
	resp := &discovery.DiscoveryResponse{VersionInfo: "1", TypeUrl: resourcev3.EndpointType, Nonce: "other"}
	for _, n := range names {
		a, _ := anypb.New(&endpoint.ClusterLoadAssignment{ClusterName: n})
		resp.Resources = append(resp.Resources, a)
	}
	return resp
}

// newNonce gives s a new nonce buffer, which its message then sends.
func (s *floorStream) newNonce() {
	b := protowire.AppendTag(nil, 5, protowire.BytesType) // nonce in both responses
	b = protowire.AppendVarint(b, nonceLen)
	s.nonce = append(b, make([]byte, nonceLen)...)
	s.msg.bufs = mem.BufferSlice{nil, mem.SliceBuffer(s.nonce)}
}

// send sends r's response with the stream's next nonce. The nonce is
// written into the stream's buffer unless the previous send's ACK was not
// read yet (grpc may not have written it): then into a new one.
func (s *floorStream) send(r *floorRound) error {
	if !s.acked.Load() {
		s.newNonce()
	}
	n := s.sent.Add(1)
	s.acked.Store(false)
	putHex(s.nonce[len(s.nonce)-nonceLen:], nonceOf(s.id, n))
	if s.delta {
		s.msg.bufs[0] = r.delta
	} else {
		s.msg.bufs[0] = r.sotw
	}
	return s.ss.SendMsg(&s.msg)
}

// readACK reads the ACK of the stream's last send: a request quoting its
// nonce without an error_detail. Anything else is counted as bad.
func (f *floor) readACK(s *floorStream) error {
	nonce, nack, err := f.read(s)
	if err != nil {
		return err
	}
	if want := nonceOf(s.id, s.sent.Load()); nack || nonce != want {
		f.bad.Add(1)
		return nil
	}
	s.acked.Store(true)
	return nil
}

// readAny reads a request of a stream of other names.
func (f *floor) readAny(s *floorStream) error {
	_, nack, err := f.read(s)
	if nack {
		f.bad.Add(1)
	}
	return err
}

// read reads one request and returns its nonce (as the floor writes them;
// 0 for another) and whether it is a NACK.
func (f *floor) read(s *floorStream) (nonce uint64, nack bool, err error) {
	if f.decode {
		if s.delta {
			req := &discovery.DeltaDiscoveryRequest{}
			if err := s.ss.RecvMsg(req); err != nil {
				return 0, false, err
			}
			return parseHex(req.GetResponseNonce()), req.GetErrorDetail() != nil, nil
		}
		req := &discovery.DiscoveryRequest{}
		if err := s.ss.RecvMsg(req); err != nil {
			return 0, false, err
		}
		return parseHex(req.GetResponseNonce()), req.GetErrorDetail() != nil, nil
	}
	if err := s.ss.RecvMsg(&s.req); err != nil {
		return 0, false, err
	}
	// response_nonce and error_detail: 5 and 6 in a DiscoveryRequest, 6
	// and 7 in a DeltaDiscoveryRequest.
	nonceField, errorField := protowire.Number(5), protowire.Number(6)
	if s.delta {
		nonceField, errorField = 6, 7
	}
	b := s.req.b
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return 0, true, nil
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == nonceField || num == errorField) {
			v, n := protowire.ConsumeBytes(b)
			if n < 0 {
				return 0, true, nil
			}
			if num == nonceField {
				nonce = parseHexBytes(v)
			} else {
				nack = true
			}
			b = b[n:]
			continue
		}
		n = protowire.ConsumeFieldValue(num, typ, b)
		if n < 0 {
			return 0, true, nil
		}
		b = b[n:]
	}
	return nonce, nack, nil
}

const hexDigits = "0123456789abcdef"

// putHex writes v as len(b) hex digits into b.
func putHex(b []byte, v uint64) {
	for i := len(b) - 1; i >= 0; i-- {
		b[i] = hexDigits[v&0xf]
		v >>= 4
	}
}

// parseHexBytes reads a nonce of putHex's; 0 if it is none.
func parseHexBytes(b []byte) uint64 {
	if len(b) != nonceLen {
		return 0
	}
	var v uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | uint64(c-'a'+10)
		default:
			return 0
		}
	}
	return v
}

func parseHex(s string) uint64 {
	v, err := strconv.ParseUint(s, 16, 64)
	if err != nil || len(s) != nonceLen {
		return 0
	}
	return v
}

// p2Floor runs P2's rounds against the floor, with the bridge's names and
// responses (c), watchers watching streams and opts.others others in the
// client process, perConn per connection.
func p2Floor(opts options, watchers, perConn int, c *p2Capture) ([]row, p2Result, error) {
	f, err := startFloor(c, opts.floorSenders, opts.floorDecode)
	if err != nil {
		return nil, p2Result{}, err
	}
	defer f.stop()
	sends := "sent by each stream's handler goroutine"
	if opts.floorSenders > 0 {
		sends = fmt.Sprintf("sent by a pool of %d goroutines, the handlers read the ACKs", opts.floorSenders)
	}
	acks := "ACKs read raw (nonce, error_detail)"
	if opts.floorDecode {
		acks = "ACKs unmarshalled (proto)"
	}
	r := f.cur.Load()
	debugf("P2 floor: the bridge's responses: SotW %d B (version %q, nonce %q), Delta %d B (system version %q, version %q, nonce %q); the floor's heads %d and %d B",
		proto.Size(c.sotw), c.sotw.GetVersionInfo(), c.sotw.GetNonce(), proto.Size(c.delta), c.delta.GetSystemVersionInfo(),
		c.delta.GetResources()[0].GetVersion(), c.delta.GetNonce(), len(r.sotw.ReadOnlyData()), len(r.delta.ReadOnlyData()))
	params := fmt.Sprintf("bare grpc-go ADS server (meshbridge's static flow-control windows, xds.TransportOptions; pass-through codec), %d watching + %d other streams (%s, in a client process), %s, %d rounds; "+
		"per round one CLA encoded, one response head each (SotW %d B, Delta %d B: the bridge's responses), + %d B nonce per stream, %s; %s (after 2 warm-up rounds)",
		watchers, opts.others, modeText(opts.p2Mode), perConnText(perConn), opts.rounds,
		len(r.sotw.ReadOnlyData()), len(r.delta.ReadOnlyData()), len(f.watchNonceField()), sends, acks)
	srv := p2Server{address: f.address(), watch: c.watch, others: c.others, change: f.push}
	res, err := p2Rounds(opts, watchers, perConn, srv, fmt.Sprintf("floor-%d-%dpc", watchers, perConn))
	if err != nil {
		return nil, res, err
	}
	if n := f.bad.Load(); n > 0 {
		return nil, res, fmt.Errorf("floor: %d ACKs of another nonce, NACKs or unexpected requests", n)
	}
	const scenario = "P2 floor (bare grpc-go)"
	rows := append(p2LatencyRows(scenario, params, res, "ms (no debounce: sent at the change)"), p2BytesRow(scenario, params, res),
		p2CPURow(scenario, "floor", params, res, "per stream-send"))
	if res.extra != 0 || res.other != 0 || res.othersWoken != 0 {
		return rows, res, errors.New("floor: a stream got more than its one response per round")
	}
	return rows, res, nil
}

// watchNonceField is the nonce field a watching stream's response ends
// with (its size).
func (f *floor) watchNonceField() []byte {
	s := &floorStream{}
	s.newNonce()
	return s.nonce
}

// floorRatioRows are the bridge's CPU per watching stream over the
// floor's, per EDS debounce setting, measured in the same run.
func floorRatioRows(opts options, watchers, perConn int, bridges []p2Result, debounces []bool, floor p2Result) []row {
	var rows []row
	for i, b := range bridges {
		ratio := b.perStream() / floor.perStream()
		rows = append(rows, row{"P2 bridge / floor: CPU per watching stream",
			fmt.Sprintf("same run: %d watching + %d other streams, %s, EDS debounce %s; bridge %.2f µs / floor %.2f µs per watching stream and change (CPU minus idle), allocations %.1f / %.1f",
				watchers, opts.others, perConnText(perConn), onOff(debounces[i]), b.perStream(), floor.perStream(),
				float64(b.allocs)/float64(b.rounds)/float64(b.watchers), float64(floor.allocs)/float64(floor.rounds)/float64(floor.watchers)),
			fmt.Sprintf("%.2f", ratio), "ratio (target ≤ 1.5)"})
	}
	return rows
}
