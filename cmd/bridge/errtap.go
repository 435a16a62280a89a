package main

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// errorTap is a slog.Handler that hands records on to next and remembers
// in last the latest one at warning level or above that carries an "err"
// attribute. It gives /debug/kubez the Kubernetes writer's last error from
// what the writer logs. Records below next's level are remembered, not
// written.
type errorTap struct {
	next slog.Handler
	last *lastError // shared with the handlers WithAttrs and WithGroup derive
}

// lastError is an error a tapped logger logged: its message and error.
type lastError struct {
	mu  sync.Mutex
	msg string
	at  time.Time
}

// last returns "<log message>: [<object>: ]<err>" and its time, or "" and
// zero.
func (l *lastError) last() (string, time.Time) {
	if l == nil {
		return "", time.Time{}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.msg, l.at
}

func (t errorTap) Enabled(ctx context.Context, level slog.Level) bool {
	return level >= slog.LevelWarn || t.next.Enabled(ctx, level)
}

func (t errorTap) Handle(ctx context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		var object, err string
		r.Attrs(func(a slog.Attr) bool {
			switch a.Key {
			case "err":
				err = a.Value.String()
			case "object":
				object = a.Value.String() + ": "
			}
			return true
		})
		if err != "" {
			t.last.mu.Lock()
			t.last.msg, t.last.at = r.Message+": "+object+err, r.Time
			t.last.mu.Unlock()
		}
	}
	if !t.next.Enabled(ctx, r.Level) {
		return nil
	}
	return t.next.Handle(ctx, r)
}

func (t errorTap) WithAttrs(attrs []slog.Attr) slog.Handler {
	return errorTap{next: t.next.WithAttrs(attrs), last: t.last}
}

func (t errorTap) WithGroup(name string) slog.Handler {
	return errorTap{next: t.next.WithGroup(name), last: t.last}
}
