package zookeeper

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/meshbridge/meshbridge/internal/strict"
	"github.com/meshbridge/meshbridge/registries/dubbo"
	"github.com/meshbridge/meshbridge/registries/dubbo/dubbotest"
	"github.com/meshbridge/meshbridge/registries/registrytest"
	"github.com/meshbridge/meshbridge/test/harness"
)

// runRegistry runs a zookeeper registry on z with the dubbo block d until
// the test ends.
func runRegistry(t *testing.T, z *harness.ZooKeeper, d dubbo.Config) (*Registry, *registrytest.Recorder) {
	t.Helper()
	// The Dubbo services' hosts state their identity (dubbotest).
	b := &Block{Servers: z.Servers(), SessionTimeout: duration("2s"), Dubbo: dubbotest.IdentityTemplates(d)}
	b.Default()
	if errs := b.Validate(); len(errs) > 0 {
		t.Fatalf("Validate: %v", errs)
	}
	reg, err := b.New("zk-test", slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return reg.(*Registry), registrytest.Run(t, reg, 20*time.Second)
}

// providerURL is a dubbo-go-like provider URL of iface on addr, as
// ZooKeeper holds it: URL-encoded once.
func providerURL(protocol, addr, iface string, params url.Values) string {
	if params == nil {
		params = url.Values{}
	}
	if params.Get("interface") == "" {
		params.Set("interface", iface)
	}
	if params.Get("side") == "" {
		params.Set("side", "provider")
	}
	raw := protocol + "://" + addr + "/" + iface + "?" + params.Encode()
	// Dubbo encodes the whole URL; url.Values.Encode already escaped the
	// values, and commas are left raw inside the URL (methods=a,b).
	raw, _ = url.QueryUnescape(raw)
	return url.QueryEscape(raw)
}

// register creates an ephemeral provider node of iface under /dubbo through
// conn and returns its path.
func register(t *testing.T, conn *zk.Conn, iface, node string) string {
	t.Helper()
	return harness.CreatePath(t, conn, "/dubbo/"+iface+"/providers/"+node, nil, zk.FlagEphemeral)
}

// serviceInstance is a Curator ServiceInstance JSON as Dubbo writes it.
func serviceInstance(app, ip string, port int, endpoints string) []byte {
	return []byte(`{"name":"` + app + `","id":"` + ip + `:` + itoa(port) + `","address":"` + ip + `","port":` + itoa(port) +
		`,"sslPort":null,"payload":{"@class":"org.apache.dubbo.registry.zookeeper.ZookeeperInstance","id":"` + ip + `:` + itoa(port) +
		`","name":"` + app + `","metadata":{"dubbo.endpoints":` + jsonString(endpoints) +
		`,"dubbo.metadata.revision":"a1b2c3","dubbo.metadata.storage-type":"local","anyhost":"true"}},` +
		`"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":null}`)
}

func itoa(n int) string { return strconv.Itoa(n) }

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// duration is a strict.Duration as the configuration gives it.
func duration(s string) strict.Duration {
	var d strict.Duration
	if err := json.Unmarshal([]byte(strconv.Quote(s)), &d); err != nil {
		panic(err)
	}
	return d
}
