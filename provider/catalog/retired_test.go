package catalog_test

import (
	"testing"

	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/google"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestNoRetiredModels: no curated entry names a vendor model the
// emulator refuses as retired (testdata/emulator/retired.go), so a
// retirement recorded there fails CI until the catalog moves on.
func TestNoRetiredModels(t *testing.T) {
	for _, e := range catalog.Default() {
		vendor := e.Provider
		if e.Provider == google.Name && google.Backend(e) == "vertex" {
			vendor = "vertex" // Vertex AI retires on its own dates
		}
		for _, v := range e.Candidates() {
			if !e.Disabled && emulator.Retired(vendor, v) {
				t.Errorf("%s names %s model %q, which its vendor has retired", e.ID, vendor, v)
			}
		}
	}
}
