package pipeline

import (
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// Dial opens the client connections for n ADS streams to addr,
// StreamsPerConn per connection (DialPerConn).
func Dial(addr string, n int) ([]*grpc.ClientConn, error) {
	return DialPerConn(addr, n, StreamsPerConn)
}

// DialPerConn opens the client connections for n ADS streams to addr,
// perConn per connection: stream i uses conns[i/perConn]. On an error it
// closes the connections it opened.
func DialPerConn(addr string, n, perConn int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, (n+perConn-1)/perConn)
	for range cap(conns) {
		conn, err := ads.Dial(addr)
		if err != nil {
			for _, c := range conns {
				_ = c.Close()
			}
			return nil, err
		}
		conns = append(conns, conn)
	}
	return conns, nil
}
