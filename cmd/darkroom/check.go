package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/provider/catalog"
	"github.com/darkroom-mcp/darkroom/provider/modelschema"
)

const modelsUsage = `Usage: darkroom models check [--json] [flags]

Asks each provider configured here, with its own credentials, which of
darkroom's curated models it serves today: reachable or not, credentials
accepted or refused, and for each model the vendor model it calls and
whether the vendor lists it; then each DARKROOM_MODELS_ALLOW pattern and
how many of its provider's models it allows. Exits 1 when a configured provider cannot be
asked or a curated model of it is not listed, so a cron job or a health
check can run it. Run it after upgrading, after rotating a key, and when a
generation fails because a model is not available. It reads the same
settings as serve (flags or DARKROOM_* variables); --json prints the
report as JSON. --spend-cents N also runs each provider's cheapest model
once, within N US cents in all (darkroom's price of each run), and
reports its time end to end: the one check that proves a key can
generate. It costs real money; nothing else here does.

`

// checkTimeout bounds the whole check.
const checkTimeout = 2 * time.Minute

// modelCheck is what one curated model resolves to.
type modelCheck struct {
	ID          string `json:"modelId"`
	VendorModel string `json:"vendorModel"`
	// State: "listed"; "listed (its next target: ...)" when the vendor
	// no longer lists the entry's endpoint and VendorModel is the target
	// it runs; "not listed"; "not checked" (the provider cannot list it);
	// or "not configured" (its provider is not set up here, with Needs
	// naming the setting).
	State string `json:"state"`
	Needs string `json:"needs,omitempty"`
	// ShutdownDate is the day the vendor says it stops serving
	// VendorModel (YYYY-MM-DD), when it announced one.
	ShutdownDate string `json:"shutdownDate,omitempty"`
	// Successor is the curated model to use instead, when one is known.
	Successor string `json:"successor,omitempty"`
	// Reason says why it is not listed, when the provider knows (ComfyUI:
	// the node a workflow needs that no backend has).
	Reason string `json:"reason,omitempty"`
}

// providerCheck is one provider's part of the report.
type providerCheck struct {
	Name string `json:"provider"`
	// State: "ok", "unreachable", "credentials refused" or "not
	// configured".
	State  string       `json:"state"`
	Error  string       `json:"error,omitempty"`
	Models []modelCheck `json:"models"`
}

type checkReport struct {
	OK        bool            `json:"ok"`
	Providers []providerCheck `json:"providers"`
	Allow     []allowCheck    `json:"allow,omitempty"`
	Spend     []spendCheck    `json:"spend,omitempty"`
}

// allowCheck is one DARKROOM_MODELS_ALLOW pattern's part of the report:
// how many of its provider's models it allows, among those the
// provider's own search finds for the pattern's words (at most
// allowSearchPages pages; More when the search went on).
type allowCheck struct {
	Pattern string `json:"pattern"`
	Matches int    `json:"matches"`
	More    bool   `json:"more,omitempty"`
	// State: "ok", "matches nothing", "provider not configured", or
	// "search failed: ...".
	State string `json:"state"`
}

// allowSearchPages bounds the pages of a provider's search one allow
// pattern is counted over.
const allowSearchPages = 4

// runModels is `darkroom models ...`.
func runModels(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] != "check" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help") {
			return flag.ErrHelp
		}
		return usageError{errors.New(`the subcommand is "check"`)}
	}
	args = slices.Clone(args[1:]) // the options below are cut out of it
	asJSON := false
	if i := slices.Index(args, "--json"); i >= 0 {
		asJSON, args = true, slices.Delete(args, i, i+1)
	}
	spendCents := 0
	if i := slices.Index(args, "--spend-cents"); i >= 0 {
		n, err := strconv.Atoi(strings.TrimSpace(strings.Join(args[i+1:min(i+2, len(args))], "")))
		if err != nil || n <= 0 {
			return usageError{errors.New("--spend-cents takes a positive number of US cents")}
		}
		spendCents, args = n, slices.Delete(args, i, i+2)
	}
	cfg, err := parseConfig("serve", args)
	if err != nil {
		return err
	}
	cfg.Webhooks = false // a check makes no provider wait for deliveries
	timeout := checkTimeout
	if spendCents > 0 {
		timeout += time.Duration(len(adapters)+1) * spendTimeout // a run per provider, each bounded
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	spool, err := os.MkdirTemp("", "darkroom-check-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(spool) // --spend-cents's synchronous results
	providers, err := remoteProviders(ctx, cfg, newLogger(cfg.LogLevel), provider.DirSpool(spool))
	if err != nil {
		return err
	}
	entries, err := curatedEntries(cfg)
	if err != nil {
		return err
	}
	report := checkModels(ctx, entries, providers)
	report.Allow = checkAllow(ctx, cfg.ModelsAllow, providers)
	if spendCents > 0 {
		report.Spend = checkSpend(ctx, spendCents, cfg.CreditsPerUSD, providers)
		for _, s := range report.Spend {
			report.OK = report.OK && !strings.HasPrefix(s.State, "failed")
		}
	}
	if asJSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		err = enc.Encode(report)
	} else {
		err = report.write(out)
	}
	if err == nil && !report.OK {
		err = errCheckFailed
	}
	return err
}

// errCheckFailed makes the exit status 1 once the report is printed.
var errCheckFailed = errors.New("some curated models are not served (see above)")

// checkModels asks each configured provider which of its curated models
// its vendor lists, and names what the others need.
func checkModels(ctx context.Context, entries []catalog.Entry, providers []provider.Provider) checkReport {
	report := checkReport{OK: true}
	unavailable := unavailableModels(entries, providers)
	entries = withProviderModels(entries, providers)
	for _, p := range providers {
		pc := providerCheck{Name: p.Name(), State: "ok"}
		listed := provider.Listing{}
		if l, ok := provider.As[provider.Lister](p); ok {
			var err error
			if listed, err = l.Listed(ctx); err != nil {
				var perm *provider.PermanentError
				pc.State, pc.Error, report.OK = "unreachable", err.Error(), false
				if errors.As(err, &perm) {
					pc.State = "credentials refused"
				}
			}
		}
		served := map[string]bool{}
		for _, m := range p.Models() {
			served[m.ID] = true
		}
		for _, e := range entries {
			if e.Disabled || e.Provider != p.Name() || !served[e.ID] {
				continue
			}
			mc := modelCheck{ID: e.ID, VendorModel: e.Candidates()[0], State: "not checked"}
			target, vm, asked := resolveTarget(e, listed)
			if !vm.ShutdownDate.IsZero() {
				mc.ShutdownDate, mc.Successor = vm.ShutdownDate.Format(time.DateOnly), e.Successor
			}
			switch {
			case !asked:
			case target == "":
				mc.State, mc.Successor, mc.Reason, report.OK = "not listed", e.Successor, listed[mc.VendorModel].Reason, false
			case target == mc.VendorModel:
				mc.State = "listed"
			default:
				// The alias runs its next target.
				mc.VendorModel, mc.State = target, "listed (its next target: "+mc.VendorModel+" is not)"
			}
			pc.Models = append(pc.Models, mc)
		}
		report.Providers = append(report.Providers, pc)
	}
	for _, e := range entries {
		need, ok := unavailable[e.ID]
		if !ok {
			continue
		}
		// Under its provider when that runs with other settings (Vertex
		// AI beside the Gemini API), else under "not configured".
		i := slices.IndexFunc(report.Providers, func(pc providerCheck) bool { return pc.Name == e.Provider })
		if i < 0 {
			report.Providers = append(report.Providers, providerCheck{Name: e.Provider, State: "not configured"})
			i = len(report.Providers) - 1
		}
		report.Providers[i].Models = append(report.Providers[i].Models, modelCheck{ID: e.ID, VendorModel: e.Candidates()[0], State: "not configured", Needs: need})
	}
	return report
}

func (r checkReport) write(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	for _, pc := range r.Providers {
		line := pc.Name + ": " + pc.State
		if pc.Error != "" {
			line += " (" + pc.Error + ")"
		}
		fmt.Fprintln(tw, line)
		for _, m := range pc.Models {
			state := m.State
			if m.Needs != "" {
				state += ": needs " + m.Needs
			}
			if m.ShutdownDate != "" {
				state += ", shuts down " + m.ShutdownDate
			}
			if m.Reason != "" {
				state += ": " + m.Reason
			}
			if m.Successor != "" {
				state += " (successor: " + m.Successor + ")"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", m.ID, m.VendorModel, state)
		}
	}
	for _, a := range r.Allow {
		more := ""
		if a.More {
			more = "+"
		}
		fmt.Fprintf(tw, "allow %s\t%d%s models\t%s\n", a.Pattern, a.Matches, more, a.State)
	}
	for _, s := range r.Spend {
		fmt.Fprintf(tw, "spend %s\t%s\t%.0f cents\t%.1f s, %d bytes\t%s\n", s.Provider, s.ModelID, s.Cents, s.Seconds, s.Bytes, s.State)
	}
	verdict := "every curated model of the configured providers is listed"
	if !r.OK {
		verdict = "NOT OK: a configured provider could not be asked, or lists a curated model no more"
	}
	fmt.Fprintln(tw, verdict)
	return tw.Flush()
}

// checkAllow counts, for each allow pattern, the models of its provider
// it allows among those the provider's search finds for the pattern's
// words: a pattern that matches nothing is a typo an operator wants to
// hear of.
func checkAllow(ctx context.Context, allow modelschema.Allow, providers []provider.Provider) []allowCheck {
	var out []allowCheck
	for _, pattern := range allow.Patterns() {
		ac := allowCheck{Pattern: pattern, State: "ok"}
		name, path, _ := strings.Cut(pattern, ":")
		var src modelschema.Source
		for _, p := range providers {
			if s, ok := p.(modelschema.Source); ok && p.Name() == name {
				src = s
			}
		}
		one, err := modelschema.ParseAllow(pattern, qualified.Names())
		switch {
		case src == nil:
			ac.State = "provider not configured"
		case err != nil:
			ac.State = err.Error()
		default:
			// The pattern up to its first wildcard is the query.
			query, _, _ := strings.Cut(path, "*")
			query = strings.TrimRight(query, "/")
			cursor := ""
			for page := 0; page < allowSearchPages; page++ {
				res, err := src.Search(ctx, query, modelschema.MaxSearchLimit, cursor)
				if err != nil {
					ac.State = "search failed: " + err.Error()
					break
				}
				for _, h := range res.Hits {
					if ref, err := qualified.ParseID(h.ID); err == nil && one.Allows(ref) {
						ac.Matches++
					}
				}
				if cursor = res.Next; cursor == "" {
					break
				}
				ac.More = page == allowSearchPages-1
			}
			if ac.Matches == 0 && ac.State == "ok" {
				ac.State = "matches nothing"
			}
		}
		out = append(out, ac)
	}
	return out
}
