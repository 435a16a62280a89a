package eureka

import (
	"os"
	"path/filepath"
	"testing"
)

// TestDecodeServerAnswers reads answers the real Eureka server (Spring
// Cloud Netflix 4.3.0, tools/eureka) gave, kept in testdata: every instance
// has the fields the mesh needs, and the hashcode of what was read is the
// server's. delta-*.json hold a whole registry's instances too (the
// retention window covered every change), so their hashcode is theirs.
func TestDecodeServerAnswers(t *testing.T) {
	files, err := filepath.Glob("testdata/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded answers in testdata: %v", err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			apps, err := decodeApplications(b)
			if err != nil {
				t.Fatal(err)
			}
			counts := map[string]int{}
			for _, a := range apps.Apps {
				for _, in := range a.Instances {
					if in.ID == "" || in.App != a.Name || in.Status == "" || in.IPAddr == "" || !in.PortEnabled || in.Port == 0 {
						t.Errorf("instance %+v: a field is missing", in)
					}
					if _, ok := in.Metadata["@class"]; ok {
						t.Errorf("instance %s: the codec's @class is metadata", in.ID)
					}
					counts[in.Status]++
				}
			}
			if got := reconcileHashcode(counts); got != apps.Hashcode {
				t.Errorf("hashcode %q, the server's %q", got, apps.Hashcode)
			}
		})
	}
}
