package harness

import (
	"bytes"
	"strconv"
	"strings"
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

// Messages returns the lines written so far of a slog text log whose
// message is msg (quoted or not, as slog writes it).
func (l *LockedBuffer) Messages(msg string) []string {
	var out []string
	for line := range strings.Lines(l.String()) {
		if strings.Contains(line, " msg="+strconv.Quote(msg)+" ") || strings.Contains(line, " msg="+msg+" ") {
			out = append(out, line)
		}
	}
	return out
}
