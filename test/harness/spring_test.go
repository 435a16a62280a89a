package harness

import (
	"encoding/json"
	"fmt"
	"path"
	"testing"
	"time"
)

// TestStartSpringAppEureka: the Spring application registers with Eureka
// as app ORDERS, UP, at 127.0.0.1 and its port, with its own metadata, and
// SIGTERM deregisters it. The test logs what the server lists of it.
func TestStartSpringAppEureka(t *testing.T) {
	e := StartEureka(t, EurekaOptions{})
	app := StartSpringApp(t, SpringAppOptions{Registry: "eureka", Address: e.URL(), Name: "orders", Metadata: map[string]string{"version": "v1"}})
	Eventually(t, time.Minute, "orders UP in eureka", func() error {
		for _, in := range e.Instances(t, "orders") {
			if in.App == "ORDERS" && in.Status == "UP" && in.IPAddr == "127.0.0.1" && in.HostName == "127.0.0.1" &&
				in.Port.N == app.Port() && in.Port.Enabled == "true" && in.Metadata["version"] == "v1" {
				return nil
			}
		}
		return fmt.Errorf("orders: %+v", e.Instances(t, "orders"))
	})
	t.Logf("GET %sapps:\n%s", e.URL(), e.GetJSON(t, "apps"))
	t.Logf("GET %sapps/delta:\n%s", e.URL(), e.GetJSON(t, "apps/delta"))
	app.Stop()
	Eventually(t, 30*time.Second, "orders deregistered", func() error {
		if got := e.Instances(t, "orders"); len(got) != 0 {
			return fmt.Errorf("orders: %+v", got)
		}
		return nil
	})
	t.Logf("after SIGTERM: GET %sapps/delta:\n%s", e.URL(), e.GetJSON(t, "apps/delta"))
}

// TestStartSpringAppZooKeeper: the Spring application registers in
// ZooKeeper as the ephemeral znode /services/orders/<id> holding Curator's
// JSON of its instance (address, port, its metadata), and SIGTERM removes
// it. The test logs the node's data.
func TestStartSpringAppZooKeeper(t *testing.T) {
	z := StartZooKeeper(t)
	app := StartSpringApp(t, SpringAppOptions{Registry: "zookeeper", Address: z.Address(), Name: "orders", Metadata: map[string]string{"version": "v1"}})
	conn := z.Client(t)
	var data []byte
	Eventually(t, time.Minute, "/services/orders/<id>", func() error {
		ids, _, err := conn.Children("/services/orders")
		if err != nil {
			return err
		}
		if len(ids) != 1 {
			return fmt.Errorf("children of /services/orders: %v", ids)
		}
		p := path.Join("/services/orders", ids[0])
		b, st, err := conn.Get(p)
		if err != nil {
			return err
		}
		if st.EphemeralOwner == 0 {
			return fmt.Errorf("%s is not ephemeral", p)
		}
		var in struct {
			Name, ID, Address string
			Port              int
			Payload           struct {
				Metadata map[string]string
			}
		}
		if err := json.Unmarshal(b, &in); err != nil {
			return fmt.Errorf("%s: %v: %s", p, err, b)
		}
		if in.Name != "orders" || in.ID != ids[0] || in.Address != "127.0.0.1" || in.Port != app.Port() ||
			in.Payload.Metadata["version"] != "v1" || in.Payload.Metadata["instance_status"] != "UP" {
			return fmt.Errorf("%s: %s", p, b)
		}
		data = b
		return nil
	})
	t.Logf("/services/orders/<id>:\n%s", data)
	app.Stop()
	Eventually(t, 30*time.Second, "/services/orders empty", func() error {
		ids, _, err := conn.Children("/services/orders")
		if err != nil {
			return err
		}
		if len(ids) != 0 {
			return fmt.Errorf("children of /services/orders: %v", ids)
		}
		return nil
	})
}
