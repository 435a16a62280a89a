package nacos

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"

	sdklogger "github.com/nacos-group/nacos-sdk-go/v2/common/logger"
)

// nacos-sdk-go v2.3.5 has one process-wide logger (common/logger.SetLogger),
// shared by every client, so its lines cannot be told apart by registry.
// sdkLog is installed once and hands each line to the logger of every
// running nacos registry, at debug level with the SDK's own level as the
// attribute sdkLevel: the SDK logs each failed request and reconnect attempt
// at error, and an outage must log one line down and one up
// (registries.Health), not one per retry. Every line is redacted first
// (redactSecrets) with the secrets of every registry.
type sdkLog struct{}

var _ sdklogger.Logger = sdkLog{}

var (
	installSDKLog sync.Once

	sdkMu      sync.Mutex
	sdkTargets = map[*Registry]*slog.Logger{}
	sdkSecrets = map[*Registry]func() []string{}
)

// attachSDKLog routes the SDK's log lines to reg's logger (and redacts the
// values secrets returns from every line) until detachSDKLog.
func attachSDKLog(reg *Registry, log *slog.Logger, secrets func() []string) {
	installSDKLog.Do(func() { sdklogger.SetLogger(sdkLog{}) })
	sdkMu.Lock()
	defer sdkMu.Unlock()
	sdkTargets[reg] = log.With("component", "nacos-sdk")
	sdkSecrets[reg] = secrets
}

func detachSDKLog(reg *Registry) {
	sdkMu.Lock()
	defer sdkMu.Unlock()
	delete(sdkTargets, reg)
	delete(sdkSecrets, reg)
}

func (sdkLog) emit(level, msg string) {
	sdkMu.Lock()
	var targets []*slog.Logger
	for _, l := range sdkTargets {
		if l.Enabled(context.Background(), slog.LevelDebug) {
			targets = append(targets, l)
		}
	}
	var sources []func() []string
	if len(targets) > 0 {
		for _, s := range sdkSecrets {
			sources = append(sources, s)
		}
	}
	sdkMu.Unlock()
	var secrets []string
	for _, s := range sources {
		secrets = append(secrets, s()...)
	}
	if len(targets) == 0 {
		return
	}
	msg = redactSecrets(msg, secrets)
	for _, l := range targets {
		l.Debug(msg, "sdkLevel", level)
	}
}

// enabled reports whether any target logs at debug, so that a line nobody
// reads is not formatted.
func (sdkLog) enabled() bool {
	sdkMu.Lock()
	defer sdkMu.Unlock()
	for _, l := range sdkTargets {
		if l.Enabled(context.Background(), slog.LevelDebug) {
			return true
		}
	}
	return false
}

func (l sdkLog) logf(level, format string, args ...any) {
	if l.enabled() {
		l.emit(level, sdkSprintf(format, args...))
	}
}

// sdkSprintf is fmt.Sprintf for the SDK's format strings, some of which
// have fewer verbs than arguments (rpc_client.go: Infof("init rpc client
// for name ", name)): the arguments no verb takes are appended as Sprint
// would join them, instead of as "%!(EXTRA string=...)".
func sdkSprintf(format string, args ...any) string {
	const extra = "%!(EXTRA "
	s := fmt.Sprintf(format, args...)
	if !strings.Contains(s, extra) {
		return s
	}
	for verbs := len(args) - 1; verbs >= 0; verbs-- {
		if s := fmt.Sprintf(format, args[:verbs]...); !strings.Contains(s, extra) {
			return strings.TrimRight(s, " ") + " " + strings.TrimSuffix(fmt.Sprintln(args[verbs:]...), "\n")
		}
	}
	return s
}

func (l sdkLog) log(level string, args ...any) {
	if l.enabled() {
		l.emit(level, strings.TrimSuffix(fmt.Sprintln(args...), "\n"))
	}
}

func (l sdkLog) Info(args ...any)             { l.log("info", args...) }
func (l sdkLog) Warn(args ...any)             { l.log("warn", args...) }
func (l sdkLog) Error(args ...any)            { l.log("error", args...) }
func (l sdkLog) Debug(args ...any)            { l.log("debug", args...) }
func (l sdkLog) Infof(f string, args ...any)  { l.logf("info", f, args...) }
func (l sdkLog) Warnf(f string, args ...any)  { l.logf("warn", f, args...) }
func (l sdkLog) Errorf(f string, args ...any) { l.logf("error", f, args...) }
func (l sdkLog) Debugf(f string, args ...any) { l.logf("debug", f, args...) }
func (sdkLog) Close() error                   { return nil }

// credentialRE matches a credential as the SDK may print one: a request's
// JSON body or headers ("accessToken":"...", accessToken=...), and the login
// form (password=...).
//
// The second form is a header in a gRPC request the SDK prints in protobuf
// text format: key:"accessToken" value:"..." (quotes possibly escaped).
var credentialRE = regexp.MustCompile(`(?i)("?(?:accessToken|password|secretKey)"?\s*[:=]\s*"?)([^"&,\s}\]]+)` +
	`|(key:\\?"(?:accessToken|password|secretKey)\\?"\s*value:\\?")([^"\\]+)`)

// redactSecrets replaces every known secret value and every credential the
// SDK may print by registries.Redacted.
func redactSecrets(s string, secrets []string) string {
	for _, v := range secrets {
		if v != "" {
			s = strings.ReplaceAll(s, v, redacted)
		}
	}
	return credentialRE.ReplaceAllString(s, "${1}${3}"+redacted)
}
