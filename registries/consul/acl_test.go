package consul

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/consul/api"

	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// TestACLDenyWithoutToken: against a deny-by-default agent, a registry with
// no token lists nothing; it says so in one warning naming the cause and
// the README's policy (not one per read) and in Status.ACLFiltered. A token
// that reads part of the catalog is reported the same way; a management
// token is not.
func TestACLDenyWithoutToken(t *testing.T) {
	c := harness.StartConsul(t, harness.WithConsulACL("deny", "root"))
	node := c.Node()
	registerPassing(t, c, "web", "web-1", "10.0.0.1", 80)
	registerPassing(t, c, "db", "db-1", "10.0.0.2", 5432)

	logged := func(t *testing.T) (*harness.LockedBuffer, *slog.Logger) {
		var logs harness.LockedBuffer
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("registry log:\n%s", logs.String())
			}
		})
		return &logs, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	// moreReads makes the catalog index move and waits until reg read the
	// catalog again, so that a per-read log line would show.
	moreReads := func(t *testing.T, reg *Registry, id string) {
		t.Helper()
		before := reg.Health().LastSuccess
		registerPassing(t, c, "other", id, "10.0.0.9", 80)
		waitFor(t, "another catalog read", func() bool { return reg.Health().LastSuccess.After(before) })
	}

	t.Run("no token", func(t *testing.T) {
		logs, logger := logged(t)
		reg, rec := runRegistry(t, Config{Name: "anonymous", Address: c.Address(), Logger: logger})
		rec.Eventually(t, "Synced with nothing", func(st registrytest.State) bool { return st.Synced == 1 })
		waitFor(t, "Status.ACLFiltered", func() bool { return reg.Status().ACLFiltered })
		moreReads(t, reg, "other-1")
		moreReads(t, reg, "other-2")
		const warning = "no ACL token is configured and the agent's default ACL policy is deny"
		if got := strings.Count(logs.String(), warning); got != 1 {
			t.Errorf("%d warnings %q, want 1", got, warning)
		}
		if !strings.Contains(logs.String(), `service_prefix \"\" { policy = \"read\" }`) {
			t.Errorf("the warning does not quote the README's policy:\n%s", logs.String())
		}
		if got := rec.Snapshots(); len(got) != 0 {
			t.Errorf("snapshots = %+v, want none: the anonymous token sees no service", got)
		}
	})

	t.Run("a token reading part of the catalog", func(t *testing.T) {
		root := c.Client().ACL()
		if _, _, err := root.PolicyCreate(&api.ACLPolicy{Name: "web-only",
			Rules: `service_prefix "web" { policy = "read" }
node_prefix "" { policy = "read" }`}, nil); err != nil {
			t.Fatal(err)
		}
		tok, _, err := root.TokenCreate(&api.ACLToken{Policies: []*api.ACLTokenPolicyLink{{Name: "web-only"}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		logs, logger := logged(t)
		reg, rec := runRegistry(t, Config{Name: "partial", Address: c.Address(), Token: tok.SecretID, Logger: logger})
		rec.Eventually(t, "Synced with web only", func(st registrytest.State) bool {
			return st.Synced == 1 && slices.Equal(st.IDs("web"), []string{node + "/web-1"}) && len(st.Good) == 1
		})
		if !reg.Status().ACLFiltered {
			t.Errorf("Status.ACLFiltered = false, want true")
		}
		moreReads(t, reg, "other-3")
		const warning = "Consul ACLs hide some services from this registry's token"
		if got := strings.Count(logs.String(), warning); got != 1 {
			t.Errorf("%d warnings %q, want 1", got, warning)
		}
		if strings.Contains(logs.String(), tok.SecretID) {
			t.Errorf("the token was logged")
		}
	})

	t.Run("a management token", func(t *testing.T) {
		logs, logger := logged(t)
		reg, rec := runRegistry(t, Config{Name: "management", Address: c.Address(), Token: "root", Logger: logger})
		rec.Eventually(t, "Synced with web and db", func(st registrytest.State) bool {
			return st.Synced == 1 && len(st.IDs("web")) == 1 && len(st.IDs("db")) == 1
		})
		if reg.Status().ACLFiltered || strings.Contains(logs.String(), "ACL") {
			t.Errorf("Status.ACLFiltered = %v, log:\n%s; want no ACL report for a management token",
				reg.Status().ACLFiltered, logs.String())
		}
	})
}
