package xds

import (
	"slices"
	"sync"
	"testing"
)

// TestStreamTable: streams are found by ID, listed, removed; a chunk whose
// streams all closed is freed.
func TestStreamTable(t *testing.T) {
	var tab streamTable
	a, b, c := &streamState{}, &streamState{}, &streamState{}
	if tab.load(1) != nil || tab.loadAndDelete(1) != nil {
		t.Fatal("an empty table has a stream")
	}
	if got := tab.loadOrStore(1, a); got != a {
		t.Fatal("loadOrStore did not store")
	}
	if got := tab.loadOrStore(1, b); got != a {
		t.Fatal("loadOrStore replaced a stored stream")
	}
	tab.loadOrStore(streamChunkSize+3, b)
	tab.loadOrStore(5*streamChunkSize, c)
	var ids []int64
	tab.each(func(id int64, _ *streamState) { ids = append(ids, id) })
	if want := []int64{1, streamChunkSize + 3, 5 * streamChunkSize}; !slices.Equal(ids, want) {
		t.Fatalf("each = %v, want %v", ids, want)
	}
	if tab.load(streamChunkSize+3) != b || tab.load(2) != nil || tab.load(-1) != nil {
		t.Fatal("load finds the wrong stream")
	}
	if tab.loadAndDelete(streamChunkSize+3) != b || tab.load(streamChunkSize+3) != nil {
		t.Fatal("loadAndDelete did not remove")
	}
	if (*tab.chunks.Load())[1] != nil {
		t.Error("an emptied chunk is kept")
	}
}

// TestStreamTableConcurrent: streams open and close in chunks that come and
// go while others list and look up the table, as the callbacks of many
// streams and a push's convergence tracking do; under -race a write to a
// slice readers hold is reported.
func TestStreamTableConcurrent(t *testing.T) {
	var tab streamTable
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 2000 {
				id := int64(n*4+w) * 7 // spread over chunks, some emptied and refilled
				st := &streamState{}
				if got := tab.loadOrStore(id, st); got != st {
					t.Errorf("stream %d: another state stored", id)
					return
				}
				if tab.load(id) != st {
					t.Errorf("stream %d: not found after store", id)
					return
				}
				if n%3 == 0 && tab.loadAndDelete(id) != st {
					t.Errorf("stream %d: not deleted", id)
					return
				}
			}
		}()
	}
	stop := make(chan struct{})
	var readers sync.WaitGroup
	readers.Add(1)
	go func() {
		defer readers.Done()
		for {
			select {
			case <-stop:
				return
			default:
				tab.each(func(int64, *streamState) {})
			}
		}
	}()
	wg.Wait()
	close(stop)
	readers.Wait()
	count := 0
	tab.each(func(int64, *streamState) { count++ })
	if want := 4 * (2000 - 667); count != want {
		t.Errorf("%d streams listed, want %d", count, want)
	}
}
