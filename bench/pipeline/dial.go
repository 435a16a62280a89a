package pipeline

import (
	"google.golang.org/grpc"

	"github.com/meshbridge/meshbridge/test/harness/ads"
)

// Dial opens the client connections for n ADS streams to addr,
// StreamsPerConn per connection: stream i uses conns[i/StreamsPerConn]. On
// an error it closes the connections it opened.
func Dial(addr string, n int) ([]*grpc.ClientConn, error) {
	conns := make([]*grpc.ClientConn, 0, (n+StreamsPerConn-1)/StreamsPerConn)
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
