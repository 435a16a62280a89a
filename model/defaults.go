package model

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RouteDefaults are what a service's providers declare for their callers
// (Dubbo's timeout, retries and loadbalance URL parameters): the route's
// timeout and retries and the cluster's load balancer of proxyless
// clients when no VirtualService or DestinationRule says otherwise
// (package xds/gen). The zero value declares nothing. Comparable.
type RouteDefaults struct {
	// Timeout is the call timeout; 0 none.
	Timeout time.Duration
	// Retries are the attempts after the first; RetriesSet tells 0 from
	// unset.
	Retries    uint32
	RetriesSet bool
	// LoadBalance is Dubbo's load balancer name, lower case ("leastactive");
	// "" none.
	LoadBalance string
}

// String is d as the meshbridge.io/dubbo-defaults annotation writes it:
// "timeout=200ms,retries=2,loadbalance=leastactive", set fields only.
func (d RouteDefaults) String() string {
	var parts []string
	if d.Timeout > 0 {
		parts = append(parts, "timeout="+d.Timeout.String())
	}
	if d.RetriesSet {
		parts = append(parts, "retries="+strconv.FormatUint(uint64(d.Retries), 10))
	}
	if d.LoadBalance != "" {
		parts = append(parts, "loadbalance="+d.LoadBalance)
	}
	return strings.Join(parts, ",")
}

// ParseRouteDefaults reads String's form; an error names the part that is
// not one.
func ParseRouteDefaults(s string) (RouteDefaults, error) {
	var d RouteDefaults
	for part := range strings.SplitSeq(s, ",") {
		if part == "" {
			continue
		}
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "timeout":
			t, err := time.ParseDuration(v)
			if err != nil || t <= 0 {
				return RouteDefaults{}, fmt.Errorf("%q: not a positive duration", part)
			}
			d.Timeout = t
		case "retries":
			n, err := strconv.ParseUint(v, 10, 32)
			if err != nil {
				return RouteDefaults{}, fmt.Errorf("%q: not a count", part)
			}
			d.Retries, d.RetriesSet = uint32(n), true
		case "loadbalance":
			d.LoadBalance = v
		default:
			return RouteDefaults{}, fmt.Errorf("%q: unknown", part)
		}
	}
	return d, nil
}
