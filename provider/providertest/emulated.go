package providertest

import (
	"fmt"
	"net/http/httptest"
	"net/url"
	"time"

	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// Emulated is the Vendor of the emulator's vendor prov ("replicate",
// "fal", "google", "vertex", "openai"), served by srv (Down closes it).
// Outcomes are the emulator's prompt tokens ([fail], [nsfw], [quota],
// [app-error], [large:N]); faults are its rules, each for one call.
func Emulated(em *emulator.Emulator, prov string, srv *httptest.Server) Vendor {
	return Vendor{
		Prompt: func(o Outcome) string {
			switch o {
			case OutcomeFail:
				return "[fail]"
			case OutcomeSafety:
				return "[nsfw]"
			case OutcomeQuota:
				return "[quota]"
			case OutcomeAppError:
				return "[app-error]"
			case OutcomeLarge:
				return fmt.Sprintf("[large:%d]", LargeOutputBytes)
			}
			panic("providertest: unknown outcome " + string(o))
		},
		Fault: func(op Op, f Fault, after time.Duration) {
			eop := emulator.OpCreate
			if op == OpStatus {
				eop = emulator.OpStatus
			}
			ef := map[Fault]emulator.Fault{FaultThrottle: emulator.Fault429, FaultServer: emulator.Fault500, FaultLoseReply: emulator.FaultLoseReply, FaultDrop: emulator.FaultDrop}[f]
			em.Inject(emulator.Rule{Provider: prov, Op: eop, Fault: ef, Times: 1, RetryAfter: after})
		},
		Down:     srv.Close,
		Advance:  em.Advance,
		Jobs:     func() int { return em.Jobs(prov) },
		Unlist:   func(m string) { em.Unlist(prov, m) },
		Redirect: func(to string) string { return em.Files.URL + "/redirect?to=" + url.QueryEscape(to) },
	}
}
