package consul

import (
	"errors"
	"net/http"

	"github.com/hashicorp/consul/api"
	"github.com/prometheus/client_golang/prometheus"

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

var (
	// errorsTotal is the counter every registry shares.
	errorsTotal = registries.RegistryErrors
	servicesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_services",
		Help: "Services the registry currently reports.",
	}, []string{"registry"})
	instancesGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "meshbridge_registry_instances",
		Help: "Usable instances the registry currently reports, summed over its services.",
	}, []string{"registry"})
)

// Collectors returns the package's metrics for the caller to register once.
func Collectors() []prometheus.Collector {
	// errorsTotal is registered with registries.Collectors; the service and
	// instance gauges' names are owned by the sync step (package
	// serviceentry), which counts every registry type alike.
	return nil
}

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
