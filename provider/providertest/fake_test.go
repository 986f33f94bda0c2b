package providertest_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/providertest"
	"github.com/darkroom-mcp/darkroom/testdata/fakeprovider"
)

// TestFake runs the contract against testdata/fakeprovider, a provider
// defined outside darkroom's adapters over an in-memory vendor (no
// emulator), and the suite's own check that a provider meeting every
// capability passes every check.
func TestFake(t *testing.T) {
	fakeprovider.Mutant = os.Getenv("PROVIDERTEST_MUTANT")
	providertest.Run(t, providertest.Harness{
		New: func(t *testing.T) providertest.Env {
			v := fakeprovider.NewVendor(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			return providertest.Env{
				Provider: fakeprovider.New(v), Model: fakeprovider.Model, VendorModel: fakeprovider.Model.ID,
				Restart: func() provider.Provider { return fakeprovider.New(v) },
				Vendor: providertest.Vendor{
					Prompt:  func(o providertest.Outcome) string { return "[" + string(o) + "]" },
					Fault:   v.Fault,
					Down:    v.Down,
					Advance: v.Advance,
					Jobs:    v.Jobs,
					Unlist:  func(string) { v.Unlist() },
				},
			}
		},
		Lacks: map[providertest.Capability]string{
			providertest.CapRedirect: "the fake's outputs are not URLs",
		},
		NotBilled: []providertest.Outcome{providertest.OutcomeFail, providertest.OutcomeSafety, providertest.OutcomeQuota, providertest.OutcomeAppError},
	})
}

// TestMutants plants one fault at a time in the fake and runs TestFake
// again (this test binary, in a child process): each fault must fail the
// check that names it, so no check passes vacuously.
func TestMutants(t *testing.T) {
	if os.Getenv("PROVIDERTEST_MUTANT") != "" {
		t.Skip("inside a mutant run")
	}
	for _, c := range []struct{ mutant, fails string }{
		{"progress-back", "Complete"},
		{"instance-state", "StatusAfterRestart"},
		{"count-ignored", "Count"},
		{"find-forgets", "FindAfterRestart"},
		{"find-forgets", "LostSubmitReply"},
		{"lost-not-created", "LostSubmitReply"},
		{"drop-not-created", "DroppedSubmit"},
		{"no-refund", "Failed"},
		{"no-refund", "Safety"},
		{"no-refund", "Quota"},
		{"no-refund", "AppError"},
		{"cancel-ignored", "Cancel"},
		{"no-hint", "Throttled"},
		{"outage-fails", "Outage"},
		{"outage-hides", "Outage"},
		{"ping-lies", "Outage"},
		{"any-url", "ForeignOutputHost"},
		{"held-whole", "LargeOutputMemory"},
		{"stale-listing", "Listing"},
	} {
		t.Run(c.mutant+"/"+c.fails, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestFake$/^"+c.fails+"$", "-test.count=1", "-test.v")
			cmd.Env = append(os.Environ(), "PROVIDERTEST_MUTANT="+c.mutant)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "--- FAIL: TestFake/"+c.fails+" ") {
				t.Fatalf("with %s planted, %s did not fail (err %v):\n%s", c.mutant, c.fails, err, out)
			}
		})
	}
}
