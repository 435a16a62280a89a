package dubbo

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestConfigValidate: every invalid field is reported, named relative to
// the dubbo block.
func TestConfigValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		json string
		want []string // substrings, one error each
	}{
		{name: "empty", json: `{}`},
		{name: "every key", json: `{"enabled":true,"mode":"interface","dropParams":["owner"],` +
			`"interfaceHostTemplate":"{{.Interface}}.rpc","applicationHostTemplate":"{{.Application}}.app"}`},
		{name: "application mode", json: `{"mode":"application"}`},
		{name: "both mode", json: `{"mode":"both"}`},
		{name: "an unknown mode", json: `{"mode":"Interface"}`, want: []string{`mode: "Interface" is not one of interface, application, both`}},
		{name: "empty dropParams", json: `{"dropParams":["owner",""," "]}`, want: []string{"dropParams[1]: empty", "dropParams[2]: empty"}},
		{name: "both faults", json: `{"mode":"all","dropParams":[""]}`, want: []string{"mode: ", "dropParams[0]: empty"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c Config
			if err := json.Unmarshal([]byte(tc.json), &c); err != nil {
				t.Fatal(err)
			}
			errs := c.Validate()
			if len(errs) != len(tc.want) {
				t.Fatalf("Validate() = %v, want %d errors %q", errs, len(tc.want), tc.want)
			}
			for i, want := range tc.want {
				if !strings.HasPrefix(errs[i].Error(), want) {
					t.Errorf("error %d = %q, want it to start with %q", i, errs[i], want)
				}
			}
		})
	}
}

// TestConfigEnabledAndDefault: Enabled is off unless set to true; Default
// fills Mode only.
func TestConfigEnabledAndDefault(t *testing.T) {
	yes, no := true, false
	for _, tc := range []struct {
		name        string
		in          Config
		wantEnabled bool
		wantMode    Mode
	}{
		{name: "zero", in: Config{}, wantEnabled: false, wantMode: ModeBoth},
		{name: "enabled false", in: Config{Enabled: &no}, wantEnabled: false, wantMode: ModeBoth},
		{name: "enabled true", in: Config{Enabled: &yes}, wantEnabled: true, wantMode: ModeBoth},
		{name: "a mode is kept", in: Config{Mode: ModeApplication}, wantMode: ModeApplication},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := tc.in
			if got := c.IsEnabled(); got != tc.wantEnabled {
				t.Errorf("IsEnabled() = %v, want %v", got, tc.wantEnabled)
			}
			c.Default()
			if c.Mode != tc.wantMode {
				t.Errorf("Mode after Default = %q, want %q", c.Mode, tc.wantMode)
			}
			if c.IsEnabled() != tc.wantEnabled || c.DropParams != nil || c.InterfaceHostTemplate != "" || c.ApplicationHostTemplate != "" {
				t.Errorf("Default changed more than Mode: %+v", c)
			}
		})
	}
}

// TestMode: which services each mode emits (doc.go rule 8); "" is both,
// and a Builder of a zero Config is in mode both.
func TestMode(t *testing.T) {
	for _, tc := range []struct {
		mode       Mode
		iface, app bool
		want       Mode
	}{
		{mode: "", iface: true, app: true, want: ModeBoth},
		{mode: ModeBoth, iface: true, app: true, want: ModeBoth},
		{mode: ModeInterface, iface: true, want: ModeInterface},
		{mode: ModeApplication, app: true, want: ModeApplication},
		{mode: "other", want: "other"},
	} {
		if tc.mode.Interface() != tc.iface || tc.mode.Application() != tc.app {
			t.Errorf("Mode(%q): Interface, Application = %v, %v; want %v, %v",
				tc.mode, tc.mode.Interface(), tc.mode.Application(), tc.iface, tc.app)
		}
		if got := mustBuilder(t, Config{Mode: tc.mode}).Mode(); got != tc.want {
			t.Errorf("NewBuilder(mode %q).Mode() = %q, want %q", tc.mode, got, tc.want)
		}
	}
}
