package xds

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	networking "istio.io/api/networking/v1"

	"github.com/meshbridge/meshbridge/model"
)

// BenchmarkPolicyChange: the full push a DestinationRule change of one
// host makes at 10,000 services (SetPolicies: every service is compared,
// one host's cluster regenerated), against the full push of a
// ServiceEntry change of one host (Full, ConfigsUpdated one host) with no
// policy at all, and with a rule on every host (a "*" rule): the cost of
// attaching the rules at each full push.
func BenchmarkPolicyChange(b *testing.B) {
	const n = 10_000
	services := make([]*model.Service, n)
	for i := range services {
		services[i] = grpcService(fmt.Sprintf("svc-%05d.local", i), 8080)
	}
	src := &staticSource{}
	src.set(services...)
	push := func(s *DiscoveryServer, req *model.PushRequest) {
		s.pushMu.Lock()
		s.pushLocked(req)
		s.pushMu.Unlock()
	}
	serviceChange := &model.PushRequest{Full: true, Reason: model.NewReason(model.ServiceUpdate), Start: time.Now(),
		ConfigsUpdated: map[model.ConfigKey]struct{}{model.ServiceKey("mesh", "svc-00000.local"): {}}}
	policyChange := &model.PushRequest{Full: true, Reason: model.NewReason(model.ConfigUpdate), Start: time.Now(),
		ConfigsUpdated: map[model.ConfigKey]struct{}{{Kind: model.KindDestinationRule}: {}}}
	newServer := func(p Policies) *DiscoveryServer {
		s := NewDiscoveryServer(src, Options{Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
		if p != nil {
			s.policies.Store(&p)
		}
		s.initialPush()
		return s
	}
	b.Run("service change, no policy", func(b *testing.B) {
		s := newServer(nil)
		for b.Loop() {
			push(s, serviceChange)
		}
	})
	b.Run("service change, a rule on every host", func(b *testing.B) {
		s := newServer(wildcardPolicies{ejectAfter("*", 3)})
		for b.Loop() {
			push(s, serviceChange)
		}
	})
	b.Run("rule change of one host", func(b *testing.B) {
		rules := [2]Policies{hostPolicies{"svc-05000.local": ejectAfter("svc-05000.local", 3)},
			hostPolicies{"svc-05000.local": ejectAfter("svc-05000.local", 4)}}
		s := newServer(rules[0])
		i := 0
		for b.Loop() {
			i++
			s.policies.Store(&rules[i%2])
			push(s, policyChange)
		}
	})
}

// wildcardPolicies gives every host one rule.
type wildcardPolicies struct{ rule *networking.DestinationRule }

func (w wildcardPolicies) For(string) *networking.DestinationRule { return w.rule }

func (w wildcardPolicies) RoutingFor(string) *networking.VirtualService { return nil }
