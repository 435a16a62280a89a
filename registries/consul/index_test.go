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

func TestBlockState(t *testing.T) {
	following := blockState{index: 42}
	confirming, _ := following.answered(7)
	tests := map[string]struct {
		from       blockState
		got        uint64
		wantWait   uint64 // the WaitIndex of the read that got it
		wantAnswer answer
		wantNext   uint64 // the WaitIndex of the read after it
		// wantConsistent: the read after it is a consistent one.
		wantConsistent bool
	}{
		"the first read does not wait": {
			from: blockState{}, got: 42, wantWait: 0,
			wantAnswer: answer{prev: 0, next: 42, changed: true}, wantNext: 42,
		},
		"a following loop waits on its index": {
			from: following, got: 43, wantWait: 42,
			wantAnswer: answer{prev: 42, next: 43, changed: true}, wantNext: 43,
		},
		"a timed-out wait is no change": {
			from: following, got: 42, wantWait: 42,
			wantAnswer: answer{prev: 42, next: 42}, wantNext: 42,
		},
		"after a failure the loop does not wait, and keeps its index": {
			from: following.failed(), got: 42, wantWait: 0,
			wantAnswer: answer{prev: 42, next: 42, recovered: true}, wantNext: 42,
		},
		"failures in a row keep the index": {
			from: following.failed().failed(), got: 50, wantWait: 0,
			wantAnswer: answer{prev: 42, next: 50, changed: true, recovered: true}, wantNext: 50,
		},
		"an index that went backwards resets to 0, is not applied, and is confirmed by a consistent read": {
			from: following, got: 7, wantWait: 42,
			wantAnswer: answer{prev: 42, next: 0, changed: true, backwards: true}, wantNext: 0, wantConsistent: true,
		},
		"an index that went backwards during a failure resets to 0 and is confirmed": {
			from: following.failed(), got: 7, wantWait: 0,
			wantAnswer: answer{prev: 42, next: 0, changed: true, recovered: true, backwards: true}, wantNext: 0, wantConsistent: true,
		},
		"the consistent read's answer is applied as a reset": {
			from: confirming, got: 9, wantWait: 0,
			wantAnswer: answer{prev: 0, next: 9, changed: true, rebuilt: true}, wantNext: 9,
		},
		"the consistent read's answer is a reset even when its index is lower still": {
			from: confirming, got: 3, wantWait: 0,
			wantAnswer: answer{prev: 0, next: 3, changed: true, rebuilt: true}, wantNext: 3,
		},
		"a failed consistent read is retried as one": {
			from: confirming.failed(), got: 9, wantWait: 0,
			wantAnswer: answer{prev: 0, next: 9, changed: true, recovered: true, rebuilt: true}, wantNext: 9,
		},
		"an index of 0 on the first read waits on 1": {
			from: blockState{}, got: 0, wantWait: 0,
			wantAnswer: answer{prev: 0, next: 1, changed: true}, wantNext: 1,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if w := tc.from.waitIndex(); w != tc.wantWait {
				t.Errorf("waitIndex() = %d, want %d", w, tc.wantWait)
			}
			st, a := tc.from.answered(tc.got)
			if a != tc.wantAnswer {
				t.Errorf("answered(%d) answer = %+v, want %+v", tc.got, a, tc.wantAnswer)
			}
			if st.failing || st.waitIndex() != tc.wantNext || st.consistent() != tc.wantConsistent {
				t.Errorf("answered(%d) state = %+v, want waiting on %d, not failing, consistent read %v", tc.got, st,
					tc.wantNext, tc.wantConsistent)
			}
			if tc.from.failed().consistent() != tc.from.consistent() {
				t.Errorf("a failed read changed whether the next is consistent (%+v)", tc.from)
			}
		})
	}
}

func TestAnswer(t *testing.T) {
	tests := map[string]struct {
		a                    answer
		wantReset, wantFresh bool
	}{
		"a moved index":                       {a: answer{prev: 42, next: 43, changed: true}, wantFresh: true},
		"a timed-out wait":                    {a: answer{prev: 42, next: 42}},
		"the first answer after a failure":    {a: answer{prev: 42, next: 42, recovered: true}, wantFresh: true},
		"a confirmed reset":                   {a: answer{prev: 0, next: 9, changed: true, rebuilt: true}, wantReset: true, wantFresh: true},
		"a reset in the answer to a recovery": {a: answer{prev: 0, next: 9, changed: true, recovered: true, rebuilt: true}, wantReset: true, wantFresh: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := tc.a.reset(); got != tc.wantReset {
				t.Errorf("%+v.reset() = %v, want %v", tc.a, got, tc.wantReset)
			}
			if got := tc.a.fresh(); got != tc.wantFresh {
				t.Errorf("%+v.fresh() = %v, want %v", tc.a, got, tc.wantFresh)
			}
		})
	}
}
