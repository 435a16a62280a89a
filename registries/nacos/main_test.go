package nacos

import (
	"os"
	"testing"

	"github.com/meshbridge/meshbridge/test/harness"
)

func TestMain(m *testing.M) {
	// The Nacos server runs only in the binary's own network namespace: its
	// JRaft port binds every interface (test/harness/netns.go).
	if code, reexeced := harness.ReexecInNetNS(); reexeced {
		os.Exit(code)
	}
	os.Exit(m.Run())
}
