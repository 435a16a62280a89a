package xds

import (
	"slices"
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
