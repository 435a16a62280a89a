package harness

import (
	"bytes"
	"sync"
)

// LockedBuffer is a bytes.Buffer that a logger may write while a test reads
// it (e.g. slog.NewTextHandler(&buf, nil) in a component under test).
type LockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *LockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns everything written so far.
func (l *LockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
