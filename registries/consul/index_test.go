package consul

import "testing"

func TestNextIndex(t *testing.T) {
	tests := map[string]struct {
		prev, got   uint64
		wantNext    uint64
		wantChanged bool
	}{
		"first read uses the returned index":             {prev: 0, got: 42, wantNext: 42, wantChanged: true},
		"a larger index is a change":                     {prev: 42, got: 43, wantNext: 43, wantChanged: true},
		"an unchanged index is a timed-out wait":         {prev: 42, got: 42, wantNext: 42, wantChanged: false},
		"an index that went backwards resets to 0":       {prev: 42, got: 7, wantNext: 0, wantChanged: true},
		"an index of 0 on the first read waits on 1":     {prev: 0, got: 0, wantNext: 1, wantChanged: true},
		"an index of 0 after a real one resets to 0":     {prev: 42, got: 0, wantNext: 0, wantChanged: true},
		"after a reset the returned index is used again": {prev: 0, got: 7, wantNext: 7, wantChanged: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			next, changed := nextIndex(tc.prev, tc.got)
			if next != tc.wantNext || changed != tc.wantChanged {
				t.Errorf("nextIndex(%d, %d) = %d, %v; want %d, %v", tc.prev, tc.got, next, changed, tc.wantNext, tc.wantChanged)
			}
		})
	}
}

func TestNextIndexNeverWaitsBelowOne(t *testing.T) {
	// A blocking query on index 0 returns at once; a watcher that kept
	// getting 0 would spin. Only the backwards reset may return 0, and the
	// read after it then moves the index to at least 1.
	for _, got := range []uint64{0, 1, 5} {
		if next, _ := nextIndex(0, got); next < 1 {
			t.Errorf("nextIndex(0, %d) = %d, want >= 1", got, next)
		}
	}
}
