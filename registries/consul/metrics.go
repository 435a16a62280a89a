package consul

import (
	"errors"
	"net/http"

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
)

// errorsTotal is the failed-read counter every registry shares
// (registries.RegistryErrors, registered by registries.Collectors). The
// meshbridge_registry_services and _instances gauges belong to the sync step
// (package serviceentry), which counts every registry type alike; this
// package's own counts show on /debug/registryz through Status.
var errorsTotal = registries.RegistryErrors

// errorReason names a failed read for meshbridge_registry_errors_total: the
// status code's meaning when Consul answered, else the loop that failed.
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
	return loop
}
