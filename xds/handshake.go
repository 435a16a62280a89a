package xds

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"google.golang.org/grpc/credentials"
)

// handshakeLogEvery is the least time between two log lines about refused
// TLS handshakes on one listener. A client retrying with a wrong certificate
// reconnects at its backoff (grpc-go: from 1s); a scanner faster: one line
// per interval, counting the ones left out, keeps the log readable.
const handshakeLogEvery = 10 * time.Second

// handshakeWatch wraps a listener's TransportCredentials: every server
// handshake that fails (wrong CA, no client certificate under mTLS,
// plaintext to a TLS port, an unsupported version) is counted in
// meshbridge_xds_tls_handshake_errors_total{listener} and logged at warn
// with the peer address and the error, at most once per handshakeLogEvery;
// the next line says how many were not logged. A connection closed before
// it sent a TLS record (io.EOF: a TCP probe, a load balancer's health check)
// is not a refused handshake: it is logged at debug only.
type handshakeWatch struct {
	credentials.TransportCredentials
	*handshakeFailures
}

// handshakeFailures is what the clones of a handshakeWatch share.
type handshakeFailures struct {
	listener   string
	log        *slog.Logger
	limit      *rate.Limiter
	suppressed atomic.Int64 // failures not logged since the last line
}

func watchHandshakes(creds credentials.TransportCredentials, listener string, log *slog.Logger) credentials.TransportCredentials {
	tlsHandshakeErrors.WithLabelValues(listener) // report 0 before the first failure
	return &handshakeWatch{
		TransportCredentials: creds,
		handshakeFailures: &handshakeFailures{
			listener: listener,
			log:      log,
			limit:    rate.NewLimiter(rate.Every(handshakeLogEvery), 1),
		},
	}
}

// ServerHandshake implements credentials.TransportCredentials.
func (w *handshakeWatch) ServerHandshake(conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	peer := conn.RemoteAddr() // before the handshake: a failed one closes conn
	out, info, err := w.TransportCredentials.ServerHandshake(conn)
	if err != nil {
		w.failed(peer, err)
	}
	return out, info, err
}

// Clone implements credentials.TransportCredentials; the clone counts and
// logs with w.
func (w *handshakeWatch) Clone() credentials.TransportCredentials {
	return &handshakeWatch{TransportCredentials: w.TransportCredentials.Clone(), handshakeFailures: w.handshakeFailures}
}

func (f *handshakeFailures) failed(peer net.Addr, err error) {
	if errors.Is(err, io.EOF) {
		f.log.Debug("Connection closed before a TLS handshake", "listener", f.listener, "peer", addrString(peer))
		return
	}
	tlsHandshakeErrors.WithLabelValues(f.listener).Inc()
	if !f.limit.Allow() {
		f.suppressed.Add(1)
		return
	}
	f.log.Warn("Refused TLS handshake", "listener", f.listener, "peer", addrString(peer), "err", err,
		"suppressed", f.suppressed.Swap(0))
}

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}
