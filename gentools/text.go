package gentools

import (
	"cmp"
	"fmt"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
)

// The first text block of every result is one line written for a person
// (a model may quote it as is): what happened, in plain words, with no
// word said twice. The full JSON follows in its own text block and in
// structuredContent.

// maxLineChars caps the line; a provider's message may be long.
const maxLineChars = 300

// summary is v's line, with output links valid from now on.
func (v *GenerationView) summary(now time.Time) string {
	var s string
	switch v.Status {
	case "completed":
		switch {
		case v.OutputsExpired:
			s = "Done earlier; its outputs have since expired and were deleted"
		case len(v.Outputs) == 0:
			s = "Done, with no outputs"
		default:
			s = "Done: " + describeOutputs(v.Kind, v.Outputs) + ", " + linkValidity(v.Outputs, now)
		}
	case "failed":
		e := cmp.Or(v.Error, &ErrorView{})
		s = "Failed: "
		if e.Kind == "internal" {
			s = "Failed inside darkroom: "
		}
		s += cmp.Or(e.Message, "no reason given")
	case "cancelled":
		s = "Cancelled; its credits were refunded"
	case "reserved":
		if v.UploadRequired {
			s = "Waiting for an upload: call upload_input with this generationId"
			if v.awaits != "" {
				s += " and " + v.awaits
			}
		} else {
			s = "Waiting for approval to spend " + words.Count(v.Credits, "credit")
		}
	case "queued", "running":
		s = v.working()
	default:
		s = "Status: " + v.Status
	}
	return oneLine(s)
}

// UploadRoles says which roles upload_input calls must name.
func UploadRoles(roles []string) string {
	if len(roles) == 1 {
		return "role " + roles[0]
	}
	return "roles " + words.And(roles) + " (one at a time)"
}

// working is the line of a generation in flight: progress, where it runs,
// and, after a wait that ended first, what to do next.
func (v *GenerationView) working() string {
	where := v.provider // as a sentence names it
	switch where {
	case "":
		where = "the provider"
	case "local":
		where = "the local provider"
	}
	phase := "queued at " + where
	if v.Status == "running" {
		phase = "running on " + where
	}
	pct := ""
	if v.Progress > 0 {
		pct = fmt.Sprintf("%.0f%% ", v.Progress*100)
	}
	if v.CancelRequested {
		return fmt.Sprintf("Cancelling: %s(%s), asked to stop", pct, phase)
	}
	s := "Working: " + pct + "(" + phase + ")"
	if pct == "" {
		s = "Working: " + phase
	}
	if v.TimedOut != nil && *v.TimedOut {
		s += "; not finished yet, call wait_generation again (never generate twice)"
	}
	return s
}

// describeOutputs is "1 image (1024×576 PNG, 44 KB)": the count, then the
// shared size and format (mixed ones are left out), the duration of a
// single video, and the total bytes.
func describeOutputs(kind string, outs []OutputView) string {
	var parts []string
	dims, format := fmt.Sprintf("%d×%d", outs[0].Width, outs[0].Height), shortType(outs[0].MimeType)
	var total int64
	for _, o := range outs {
		if o.Width != outs[0].Width || o.Height != outs[0].Height || o.Width <= 0 {
			dims = ""
		}
		if shortType(o.MimeType) != format {
			format = ""
		}
		total += o.Bytes
	}
	switch {
	case dims != "" && format != "":
		parts = append(parts, dims+" "+format)
	case dims+format != "":
		parts = append(parts, dims+format)
	}
	if len(outs) == 1 && outs[0].DurationSeconds > 0 {
		parts = append(parts, fmt.Sprintf("%.3g s", outs[0].DurationSeconds))
	}
	size := humanBytes(total)
	if len(outs) > 1 {
		size += " in all"
	}
	parts = append(parts, size)
	return fmt.Sprintf("%s (%s)", words.Count(len(outs), cmp.Or(kind, "output")), strings.Join(parts, ", "))
}

// shortType is "PNG" for image/png.
func shortType(mime string) string {
	_, sub, ok := strings.Cut(mime, "/")
	if !ok || sub == "" {
		return ""
	}
	sub, _, _ = strings.Cut(sub, ";")
	return strings.ToUpper(sub)
}

// humanBytes is a size in decimal units, as a file manager shows it.
func humanBytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%d KB", (n+500)/1000)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.1f GB", float64(n)/1e9)
}

// linkValidity is "link valid 15 min" for the link that expires first.
func linkValidity(outs []OutputView, now time.Time) string {
	noun := "link"
	if len(outs) > 1 {
		noun = "links"
	}
	var first time.Time
	for _, o := range outs {
		t, err := time.Parse(time.RFC3339Nano, o.ExpiresAt)
		if err != nil {
			return noun + " in structuredContent"
		}
		if first.IsZero() || t.Before(first) {
			first = t
		}
	}
	return noun + " valid " + humanDuration(first.Sub(now))
}

// humanDuration rounds d to the unit a person would say.
func humanDuration(d time.Duration) string {
	switch {
	case d < 30*time.Second:
		return "under a minute"
	case d < 120*time.Minute:
		return fmt.Sprintf("%d min", int(d.Round(time.Minute)/time.Minute))
	case d < 48*time.Hour:
		return fmt.Sprintf("%d h", int(d.Round(time.Hour)/time.Hour))
	}
	return fmt.Sprintf("%d days", int(d.Round(24*time.Hour)/(24*time.Hour)))
}

// oneLine folds whitespace (a provider's message may hold newlines) and
// caps the length.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxLineChars {
		s = string(r[:maxLineChars-1]) + "…"
	}
	return s
}

// modelsLine is list_models' line: how many, of which kind, at what price.
func modelsLine(models []provider.Model) string {
	if len(models) == 0 {
		return "No models are configured on this server"
	}
	kinds := map[provider.Kind]int{}
	lo, hi := models[0].Credits, models[0].Credits
	for _, m := range models {
		kinds[m.Kind]++
		lo, hi = min(lo, m.Credits), max(hi, m.Credits)
	}
	var parts []string
	for _, k := range []provider.Kind{provider.KindImage, provider.KindVideo} {
		if n := kinds[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	price := fmt.Sprintf("%d credits each", lo)
	if lo != hi {
		price = fmt.Sprintf("%d–%d credits", lo, hi)
	}
	return fmt.Sprintf("%s (%s) at %s; pass a modelId to generate", words.Count(len(models), "model"), strings.Join(parts, ", "), price)
}

// outputLine is download_output's line.
func outputLine(i int, kind string, o OutputView, now time.Time) string {
	d := describeOutputs(kind, []OutputView{o})
	_, d, _ = strings.Cut(d, " (") // "1 image (1024×576 PNG, 44 KB)" → "1024×576 PNG, 44 KB)"
	return fmt.Sprintf("Output %d: %s (%s, %s)", i, kind, strings.TrimSuffix(d, ")"), linkValidity([]OutputView{o}, now))
}

// generationsLine is list_generations' line: how many, by outcome.
func generationsLine(views []*GenerationView) string {
	if len(views) == 0 {
		return "No generations"
	}
	counts := map[string]int{}
	for _, v := range views {
		switch v.Status {
		case "completed":
			counts["done"]++
		case "queued", "running":
			counts["working"]++
		case "reserved":
			counts["waiting"]++
		default:
			counts[v.Status]++
		}
	}
	var parts []string
	for _, k := range []string{"done", "working", "waiting", "failed", "cancelled"} {
		if n := counts[k]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, k))
		}
	}
	return fmt.Sprintf("%s: %s", words.Count(len(views), "generation"), strings.Join(parts, ", "))
}
