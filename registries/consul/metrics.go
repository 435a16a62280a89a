package consul

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"strings"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries"
)

// Error reasons: the loop whose read failed, or what a Consul status code
// says about it. Low-cardinality on purpose.
const (
	reasonCatalog     = "catalog"
	reasonHealth      = "health"
	reasonState       = "state"
	reasonUnavailable = "unavailable"
	reasonForbidden   = "forbidden"
	reasonTLS         = "tls"
)

// errorsTotal is the failed-read counter every registry shares
// (registries.RegistryErrors, incremented by registries.Session through Health.Fail). The
// meshbridge_registry_services and _instances gauges belong to the sync step
// (package serviceentry), which counts every registry type alike; this
// package's own counts show on /debug/registryz through Status.
var errorsTotal = registries.RegistryErrors

// errorReason names a failed read for meshbridge_registry_errors_total: the
// status code's meaning when Consul answered, "tls" when the TLS handshake
// refused a certificate, else the loop that failed.
func errorReason(loop string, err error) string {
	var se api.StatusError
	if errors.As(err, &se) {
		switch {
		case se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden:
			return reasonForbidden
		case se.Code == http.StatusTooManyRequests || se.Code >= 500:
			return reasonUnavailable
		}
	}
	if isTLSRefusal(err) {
		return reasonTLS
	}
	return loop
}

// classify marks with registries.Permanent the read errors that retrying
// does not fix without an operator:
//   - 401 and 403: Consul refuses the token ("ACL not found", "Permission
//     denied");
//   - the agent's certificate fails verification (unknown authority, wrong
//     name, expired), or the agent refuses ours (TLS alerts bad certificate,
//     certificate required, unknown CA, ...);
//   - HTTPS to a plain HTTP port, and plain HTTP to an HTTPS port (the
//     agent's 400 "Client sent an HTTP request to an HTTPS server").
//
// Connection errors, timeouts, 429 and 5xx stay transient.
func classify(err error) error {
	var se api.StatusError
	switch {
	case errors.As(err, &se) && (se.Code == http.StatusUnauthorized || se.Code == http.StatusForbidden):
		return registries.Permanent(err)
	case errors.As(err, &se) && se.Code == http.StatusBadRequest && strings.Contains(se.Body, "HTTP request to an HTTPS server"):
		return registries.Permanent(err)
	case isTLSRefusal(err):
		return registries.Permanent(err)
	case strings.Contains(err.Error(), "server gave HTTP response to HTTPS client"): // net/http's text, not a type
		return registries.Permanent(err)
	}
	return err
}

// certAlerts are the TLS alerts (RFC 8446 §6.2, crypto/tls texts) a server
// sends when it refuses the client's certificate. crypto/tls reports a
// received alert as a *net.OpError with Op "remote error" wrapping an
// unexported type, so the text is all there is to match.
var certAlerts = []string{
	"tls: bad certificate",
	"tls: unsupported certificate",
	"tls: revoked certificate",
	"tls: expired certificate",
	"tls: unknown certificate",
	"tls: unknown certificate authority",
	"tls: access denied",
	"tls: certificate required",
}

// isTLSRefusal reports whether err is a certificate refused on either side
// of the TLS handshake.
func isTLSRefusal(err error) bool {
	var (
		verify   *tls.CertificateVerificationError
		unknown  x509.UnknownAuthorityError
		hostname x509.HostnameError
		invalid  x509.CertificateInvalidError
		op       *net.OpError
	)
	switch {
	case errors.As(err, &verify), errors.As(err, &unknown), errors.As(err, &hostname), errors.As(err, &invalid):
		return true
	case errors.As(err, &op) && op.Op == "remote error" && op.Err != nil:
		for _, a := range certAlerts {
			if op.Err.Error() == a {
				return true
			}
		}
	}
	return false
}
