package nacos

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/meshbridge/meshbridge/test/harness"
)

// TestSDKLogFormatsEveryArgument: the SDK's lines reach the registry's
// logger whole: a format string with fewer verbs than arguments (as
// nacos-sdk-go v2.3.5 writes some) gets the rest appended, not
// "%!(EXTRA ...)".
func TestSDKLogFormatsEveryArgument(t *testing.T) {
	for _, tc := range []struct {
		format string
		args   []any
		want   string
	}{
		{"init rpc client for name ", []any{"c-1"}, "init rpc client for name c-1"},
		{"check tls config ", []any{struct{ Enable bool }{true}}, "check tls config {true}"},
		{"server %s down after %d tries", []any{"10.0.0.1:9848", 3, "extra"}, "server 10.0.0.1:9848 down after 3 tries extra"},
		{"no arguments", nil, "no arguments"},
	} {
		var logs harness.LockedBuffer
		reg := &Registry{}
		attachSDKLog(reg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug})), func() []string { return nil })
		sdkLog{}.Infof(tc.format, tc.args...)
		detachSDKLog(reg)
		out := logs.String()
		if !strings.Contains(out, `msg="`+tc.want+`"`) || strings.Contains(out, "%!") {
			t.Errorf("Infof(%q, %v) logged\n%s\nwant msg=%q", tc.format, tc.args, out, tc.want)
		}
	}
}
