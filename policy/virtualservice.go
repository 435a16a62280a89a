package policy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/protobuf/types/known/durationpb"
	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/xds/gen"
)

// parseVirtualService reads and validates d's spec (rules 1, 2).
func parseVirtualService(d document) (*networking.VirtualService, error) {
	vs := &networking.VirtualService{}
	if err := parseSpec(d, vs); err != nil {
		return nil, err
	}
	return checkVirtualService(vs)
}

// checkVirtualService lower-cases vs's hosts and destination hosts, in
// place, and validates it (rule 2): a VirtualService of any source.
func checkVirtualService(vs *networking.VirtualService) (*networking.VirtualService, error) {
	for i, h := range vs.GetHosts() {
		vs.Hosts[i] = strings.ToLower(h)
	}
	for _, r := range vs.GetHttp() {
		for _, dst := range r.GetRoute() {
			if dst.GetDestination() != nil {
				dst.Destination.Host = strings.ToLower(dst.GetDestination().GetHost())
			}
		}
	}
	if err := validateExportTo(vs.GetExportTo()); err != nil {
		return nil, err
	}
	if err := validateVirtualService(vs); err != nil {
		return nil, err
	}
	return vs, nil
}

// MeshGateway is the gateway name that binds a VirtualService to the
// mesh's clients, as in Istio; a VirtualService whose gateways omit it
// applies to gateways only and is not served (rule 8).
const MeshGateway = "mesh"

// AppliesToMesh reports whether vs applies to the mesh's clients: it
// names no gateway, or names "mesh".
func AppliesToMesh(vs *networking.VirtualService) bool {
	return len(vs.GetGateways()) == 0 || slices.Contains(vs.GetGateways(), MeshGateway)
}

// validateVirtualService checks vs as istiod's ValidateVirtualService does
// for the fields meshbridge serves and their neighbours (rule 2): hosts,
// HTTP routes with destinations whose weights sum to 100 when there are
// several, matches (one of exact, prefix, regex; RE2 regexes), positive
// durations, retry conditions, fault percentages and statuses.
func validateVirtualService(vs *networking.VirtualService) error {
	if len(vs.GetHosts()) == 0 {
		return fmt.Errorf("spec.hosts is empty")
	}
	seen := map[string]bool{}
	for i, h := range vs.GetHosts() {
		if err := validateHost(fmt.Sprintf("spec.hosts[%d]", i), h, false); err != nil {
			return err
		}
		if seen[h] {
			return fmt.Errorf("spec.hosts[%d] %q: listed before", i, h)
		}
		seen[h] = true
	}
	if len(vs.GetHttp()) == 0 && len(vs.GetTcp()) == 0 && len(vs.GetTls()) == 0 {
		return fmt.Errorf("spec: no http, tcp or tls route")
	}
	for i, r := range vs.GetHttp() {
		if err := validateHTTPRoute(fmt.Sprintf("spec.http[%d]", i), r); err != nil {
			return err
		}
	}
	return nil
}

func validateHTTPRoute(at string, r *networking.HTTPRoute) error {
	if len(r.GetRoute()) == 0 && r.GetRedirect() == nil && r.GetDirectResponse() == nil && r.GetDelegate() == nil {
		return fmt.Errorf("%s: no route, redirect, direct response or delegate", at)
	}
	var total int32
	for k, dst := range r.GetRoute() {
		dat := fmt.Sprintf("%s.route[%d]", at, k)
		if dst.GetDestination() == nil {
			return fmt.Errorf("%s.destination is missing", dat)
		}
		if err := validateHost(dat+".destination.host", dst.GetDestination().GetHost(), false); err != nil {
			return err
		}
		if strings.HasPrefix(dst.GetDestination().GetHost(), "*") {
			return fmt.Errorf("%s.destination.host %q: a destination is one host, not a wildcard", dat, dst.GetDestination().GetHost())
		}
		if n := dst.GetDestination().GetPort().GetNumber(); n > 65535 {
			return fmt.Errorf("%s.destination.port.number %d: not a port (1-65535)", dat, n)
		}
		if w := dst.GetWeight(); w < 0 || w > 100 {
			return fmt.Errorf("%s.weight %d: not within 0-100", dat, w)
		}
		total += dst.GetWeight()
	}
	if len(r.GetRoute()) > 1 && total != 100 {
		return fmt.Errorf("%s.route: the weights sum to %d, not 100", at, total)
	}
	for k, m := range r.GetMatch() {
		mat := fmt.Sprintf("%s.match[%d]", at, k)
		if err := validateStringMatch(mat+".uri", m.GetUri()); err != nil {
			return err
		}
		for _, headers := range []struct {
			field string
			m     map[string]*networking.StringMatch
		}{{"headers", m.GetHeaders()}, {"withoutHeaders", m.GetWithoutHeaders()}} {
			for name, sm := range headers.m {
				if name == "" || name != strings.ToLower(name) {
					return fmt.Errorf("%s.%s %q: a header name is lower case and not empty", mat, headers.field, name)
				}
				if err := validateStringMatch(fmt.Sprintf("%s.%s[%s]", mat, headers.field, name), sm); err != nil {
					return err
				}
			}
		}
		if m.GetPort() > 65535 {
			return fmt.Errorf("%s.port %d: not a port (1-65535)", mat, m.GetPort())
		}
	}
	if err := validateDuration(at+".timeout", r.GetTimeout()); err != nil {
		return err
	}
	if rt := r.GetRetries(); rt != nil {
		if rt.GetAttempts() < 0 {
			return fmt.Errorf("%s.retries.attempts %d: negative", at, rt.GetAttempts())
		}
		if err := validateDuration(at+".retries.perTryTimeout", rt.GetPerTryTimeout()); err != nil {
			return err
		}
		if err := validateDuration(at+".retries.backoff", rt.GetBackoff()); err != nil {
			return err
		}
		for cond := range strings.SplitSeq(rt.GetRetryOn(), ",") {
			if cond = strings.TrimSpace(cond); cond != "" && !RetryCondition(cond) {
				return fmt.Errorf("%s.retries.retryOn %q: not a retry condition", at, cond)
			}
		}
	}
	if f := r.GetFault(); f != nil {
		if f.GetDelay() == nil && f.GetAbort() == nil {
			return fmt.Errorf("%s.fault: neither delay nor abort", at)
		}
		if d := f.GetDelay(); d != nil {
			if err := validatePercent(at+".fault.delay.percentage", d.GetPercentage()); err != nil {
				return err
			}
			if d.GetFixedDelay() == nil && d.GetExponentialDelay() == nil {
				return fmt.Errorf("%s.fault.delay: no fixedDelay", at)
			}
			if err := validateDuration(at+".fault.delay.fixedDelay", d.GetFixedDelay()); err != nil {
				return err
			}
		}
		if a := f.GetAbort(); a != nil {
			if err := validatePercent(at+".fault.abort.percentage", a.GetPercentage()); err != nil {
				return err
			}
			switch e := a.GetErrorType().(type) {
			case *networking.HTTPFaultInjection_Abort_HttpStatus:
				if e.HttpStatus < 200 || e.HttpStatus > 599 {
					return fmt.Errorf("%s.fault.abort.httpStatus %d: not within 200-599", at, e.HttpStatus)
				}
			case *networking.HTTPFaultInjection_Abort_GrpcStatus:
				if _, ok := gen.GRPCCode(e.GrpcStatus); !ok {
					return fmt.Errorf("%s.fault.abort.grpcStatus %q: not a gRPC status code name", at, e.GrpcStatus)
				}
			case nil:
				return fmt.Errorf("%s.fault.abort: no httpStatus or grpcStatus", at)
			}
		}
	}
	return nil
}

// validateStringMatch checks that m sets one of exact, prefix and regex,
// and that a regex is RE2 (nil is valid: no match on the field).
func validateStringMatch(at string, m *networking.StringMatch) error {
	if m == nil {
		return nil
	}
	switch v := m.GetMatchType().(type) {
	case nil:
		return fmt.Errorf("%s: none of exact, prefix, regex", at)
	case *networking.StringMatch_Regex:
		if _, err := regexp.Compile(v.Regex); err != nil {
			return fmt.Errorf("%s.regex: %w", at, err)
		}
	}
	return nil
}

// validateDuration checks an optional duration is at least 1ms.
func validateDuration(at string, d *durationpb.Duration) error {
	if d != nil && (d.CheckValid() != nil || d.AsDuration() < 1e6) {
		return fmt.Errorf("%s %v: must be at least 1ms", at, d.AsDuration())
	}
	return nil
}

// validatePercent checks an optional percentage is within 0-100.
func validatePercent(at string, p *networking.Percent) error {
	if p != nil && (p.GetValue() < 0 || p.GetValue() > 100) {
		return fmt.Errorf("%s %v: not a percentage (0-100)", at, p.GetValue())
	}
	return nil
}

// envoyRetryConditions are Envoy's HTTP retry_on conditions, which Istio
// accepts in retryOn besides gRPC status names and HTTP status codes.
var envoyRetryConditions = map[string]bool{
	"5xx": true, "gateway-error": true, "reset": true, "reset-before-request": true, "connect-failure": true,
	"envoy-ratelimited": true, "retriable-4xx": true, "refused-stream": true, "retriable-status-codes": true,
	"retriable-headers": true, "http3-post-connect-failure": true,
}

// RetryCondition reports whether cond is a retryOn condition Istio
// accepts: an Envoy HTTP condition, a gRPC one, or an HTTP status code.
func RetryCondition(cond string) bool {
	if envoyRetryConditions[cond] || slices.Contains(gen.GRPCRetryConditions, cond) {
		return true
	}
	code, err := strconv.Atoi(cond)
	return err == nil && strconv.Itoa(code) == cond && code >= 100 && code <= 599
}
