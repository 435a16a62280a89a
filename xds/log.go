package xds

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/envoyproxy/go-control-plane/pkg/log"
)

// gcpLogger adapts slog to go-control-plane's log.Logger. go-control-plane
// formats its own messages, so they go under the key "detail" below a static
// message. Its Info level logs every watch opened (once per request per
// stream), so it is lowered to Debug.
func gcpLogger(l *slog.Logger) log.Logger {
	emit := func(level slog.Level) func(string, ...any) {
		return func(format string, args ...any) {
			ctx := context.Background()
			if l.Enabled(ctx, level) {
				l.Log(ctx, level, "Logged by go-control-plane", "detail", fmt.Sprintf(format, args...))
			}
		}
	}
	return log.LoggerFuncs{
		DebugFunc: emit(slog.LevelDebug),
		InfoFunc:  emit(slog.LevelDebug),
		WarnFunc:  emit(slog.LevelWarn),
		ErrorFunc: emit(slog.LevelError),
	}
}
