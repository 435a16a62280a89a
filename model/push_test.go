package model

import (
	"maps"
	"testing"
	"time"
)

func TestPushRequestMergeAndAbsorb(t *testing.T) {
	t0 := time.Unix(100, 0)
	a, b := ServiceKey("ns", "a"), ServiceKey("ns", "b")
	cases := map[string]struct {
		x, y *PushRequest
		want PushRequest
	}{
		"full is ORed": {
			x: &PushRequest{Full: false}, y: &PushRequest{Full: true}, want: PushRequest{Full: true},
		},
		"configs are unioned and reasons summed": {
			x: &PushRequest{ConfigsUpdated: map[ConfigKey]struct{}{a: {}}, Reason: NewReason(EndpointUpdate)},
			y: &PushRequest{ConfigsUpdated: map[ConfigKey]struct{}{b: {}}, Reason: NewReason(EndpointUpdate, ServiceUpdate)},
			want: PushRequest{ConfigsUpdated: map[ConfigKey]struct{}{a: {}, b: {}},
				Reason: ReasonStats{EndpointUpdate: 2, ServiceUpdate: 1}},
		},
		"the oldest start is kept": {
			x: &PushRequest{Start: t0.Add(time.Second)}, y: &PushRequest{Start: t0}, want: PushRequest{Start: t0},
		},
		"a zero start takes the other's": {
			x: &PushRequest{}, y: &PushRequest{Start: t0}, want: PushRequest{Start: t0},
		},
	}
	check := func(t *testing.T, how string, got *PushRequest, want PushRequest) {
		t.Helper()
		if got.Full != want.Full || !got.Start.Equal(want.Start) || !maps.Equal(got.ConfigsUpdated, want.ConfigsUpdated) ||
			!maps.Equal(got.Reason, want.Reason) {
			t.Errorf("%s = %+v, want %+v", how, got, want)
		}
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			xBefore := tc.x.Clone()
			check(t, "Merge", tc.x.Merge(tc.y), tc.want)
			check(t, "x after Merge (unchanged)", tc.x, *xBefore)
			acc := tc.x.Clone()
			acc.Absorb(tc.y)
			check(t, "Absorb", acc, tc.want)
			check(t, "x after Absorb into its clone (unchanged)", tc.x, *xBefore)
		})
	}
}
