package xds

import (
	"sync"
	"sync/atomic"
)

// streamTable holds the state of one listener's open streams of one mode
// (SotW or Delta) by stream ID. go-control-plane numbers each server's
// streams from 1 up, so the IDs of open streams are dense and a table of
// chunks indexed by ID finds a stream with two loads, where a map hashes
// a key and, for thousands of streams, misses the cache on the way:
// every response and every answer of every stream looks its state up. A
// chunk whose slots all emptied is freed, so IDs of closed streams cost
// nothing.
type streamTable struct {
	mu     sync.Mutex // serialises writers
	chunks atomic.Pointer[[]*streamChunk]
}

const streamChunkSize = 512

type streamChunk struct {
	slots [streamChunkSize]atomic.Pointer[streamState]
	used  int // guarded by streamTable.mu
}

// load returns the state of stream id, nil when none.
func (t *streamTable) load(id int64) *streamState {
	chunks := t.chunks.Load()
	i := id / streamChunkSize
	if chunks == nil || id < 0 || i >= int64(len(*chunks)) {
		return nil
	}
	if c := (*chunks)[i]; c != nil {
		return c.slots[id%streamChunkSize].Load()
	}
	return nil
}

// loadOrStore returns the state of stream id, storing st when it has none.
func (t *streamTable) loadOrStore(id int64, st *streamState) *streamState {
	if got := t.load(id); got != nil {
		return got
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if got := t.load(id); got != nil {
		return got
	}
	i := int(id / streamChunkSize)
	var chunks []*streamChunk
	if p := t.chunks.Load(); p != nil {
		chunks = *p
	}
	if i >= len(chunks) || chunks[i] == nil {
		// A published slice is never written: readers load it without
		// the lock. A new chunk goes into a copy, published whole.
		grown := make([]*streamChunk, max(i+1, len(chunks)))
		copy(grown, chunks)
		grown[i] = new(streamChunk)
		chunks = grown
		t.chunks.Store(&chunks)
	}
	c := chunks[i]
	c.slots[id%streamChunkSize].Store(st)
	c.used++
	return st
}

// loadAndDelete removes stream id and returns its state, nil when none.
func (t *streamTable) loadAndDelete(id int64) *streamState {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.chunks.Load()
	i := id / streamChunkSize
	if p == nil || id < 0 || i >= int64(len(*p)) || (*p)[i] == nil {
		return nil
	}
	chunks := *p
	c := chunks[i]
	st := c.slots[id%streamChunkSize].Swap(nil)
	if st == nil {
		return nil
	}
	if c.used--; c.used == 0 {
		copied := append([]*streamChunk(nil), chunks...)
		copied[i] = nil
		t.chunks.Store(&copied)
	}
	return st
}

// each calls f with every stored stream's ID and state.
func (t *streamTable) each(f func(id int64, st *streamState)) {
	p := t.chunks.Load()
	if p == nil {
		return
	}
	for i, c := range *p {
		if c == nil {
			continue
		}
		for j := range c.slots {
			if st := c.slots[j].Load(); st != nil {
				f(int64(i)*streamChunkSize+int64(j), st)
			}
		}
	}
}
