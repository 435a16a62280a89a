package translate

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Length limits from Kubernetes apimachinery validation (IsDNS1123Label,
// IsDNS1123Subdomain, IsQualifiedName, IsValidLabelValue).
const (
	maxLabelLength     = 63
	maxSubdomainLength = 253
	maxFQDNLength      = 255 // istio pkg/config/validation/agent checkDNS1123Preconditions
)

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

func isLowerAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
}

// isDNS1123Label reports whether s matches [a-z0-9]([-a-z0-9]*[a-z0-9])? and
// is at most 63 characters long.
func isDNS1123Label(s string) bool {
	if len(s) == 0 || len(s) > maxLabelLength || !isLowerAlnum(s[0]) || !isLowerAlnum(s[len(s)-1]) {
		return false
	}
	for i := 1; i < len(s)-1; i++ {
		if c := s[i]; !isLowerAlnum(c) && c != '-' {
			return false
		}
	}
	return true
}

// isDNS1123Subdomain reports whether s is at most 253 characters of
// dot-separated DNS-1123 labels. Unlike apimachinery it also bounds each label
// to 63 characters, as DNS (and istiod's host validation) does.
func isDNS1123Subdomain(s string) bool {
	if len(s) == 0 || len(s) > maxSubdomainLength {
		return false
	}
	for label := range strings.SplitSeq(s, ".") {
		if !isDNS1123Label(label) {
			return false
		}
	}
	return true
}

// isObjectName reports whether s is a valid Kubernetes object name
// (apimachinery IsDNS1123Subdomain): at most 253 characters of dot-separated
// [a-z0-9]([-a-z0-9]*[a-z0-9])? parts, with no per-part length limit. A
// WorkloadEntry name's last part (host's last label + "-" + 10 hex) may pass 63.
func isObjectName(s string) bool {
	if len(s) == 0 || len(s) > maxSubdomainLength {
		return false
	}
	for part := range strings.SplitSeq(s, ".") {
		if part == "" || !isLowerAlnum(part[0]) || !isLowerAlnum(part[len(part)-1]) {
			return false
		}
		for i := 1; i < len(part)-1; i++ {
			if c := part[i]; !isLowerAlnum(c) && c != '-' {
				return false
			}
		}
	}
	return true
}

// validateFQDN mirrors istio pkg/config/validation/agent ValidateFQDN: at most
// 255 characters of DNS-1123 labels, a top-level label that is not all digits,
// and an optional trailing dot.
func validateFQDN(name string) error {
	if len(name) == 0 {
		return errors.New("empty domain name not allowed")
	}
	if len(name) > maxFQDNLength {
		return fmt.Errorf("domain name %q too long (max %d)", name, maxFQDNLength)
	}
	return validateDNS1123Labels(name, name)
}

// validateWildcardDomain mirrors istio ValidateWildcardDomain: like
// validateFQDN, but the first label may be "*" or start with "*".
func validateWildcardDomain(name string) error {
	if len(name) == 0 {
		return errors.New("empty domain name not allowed")
	}
	if len(name) > maxFQDNLength {
		return fmt.Errorf("domain name %q too long (max %d)", name, maxFQDNLength)
	}
	first, rest, hasRest := strings.Cut(name, ".")
	if !isWildcardLabel(first) {
		return fmt.Errorf("domain name %q invalid (label %q invalid)", name, first)
	}
	if !hasRest {
		return nil
	}
	return validateDNS1123Labels(name, rest)
}

func isWildcardLabel(label string) bool {
	switch {
	case label == "*":
		return true
	case strings.HasPrefix(label, "*-"):
		return isDNS1123Label(label[2:])
	case strings.HasPrefix(label, "*"):
		return isDNS1123Label(label[1:])
	}
	return isDNS1123Label(label)
}

func validateDNS1123Labels(name, domain string) error {
	parts := strings.Split(domain, ".")
	tld := parts[len(parts)-1]
	if _, err := strconv.Atoi(tld); err == nil {
		return fmt.Errorf("domain name %q invalid (top level domain %q cannot be all-numeric)", name, tld)
	}
	for i, label := range parts {
		if i == len(parts)-1 && label == "" && i > 0 {
			return nil // a trailing dot, as in "istio.io."
		}
		if !isDNS1123Label(label) {
			return fmt.Errorf("domain name %q invalid (label %q invalid)", name, label)
		}
	}
	return nil
}

func hasWildcard(host string) bool {
	return strings.HasPrefix(host, "*")
}
