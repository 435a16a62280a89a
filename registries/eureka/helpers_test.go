package eureka

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/meshbridge/meshbridge/registries/eureka/eurekatest"
)

var errNotYet = errors.New("not yet")

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o600) }

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// upInstance is an UP instance of app on 127.0.0.1 (several per machine:
// each on its own port).
func upInstance(app string, port int) eurekatest.Instance {
	return eurekatest.Instance{App: app, ID: fmt.Sprintf("host-1:%s:%d", app, port), HostName: "host-1", IPAddr: "127.0.0.1",
		Status: StatusUp, Port: uint32(port), SecurePort: 443}
}
