package gentools

import (
	"context"
	"fmt"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// NeedsApproval is the approval rule: a create costing more than the
// caller's threshold (nil: none) waits for the caller to approve it.
func NeedsApproval(credits int64, threshold *int64) bool {
	return threshold != nil && credits > *threshold
}

// dryRun answers generate with dryRun: the validated request's price and
// what the budget and the approval rule would say of it now. It creates,
// stores and charges nothing.
func (t *Tools) dryRun(ctx context.Context, c *Creation) (*mcp.CallToolResult, error) {
	owner, cr, m := c.Owner, c.Request, c.Model
	spent, err := t.svc.Spent(ctx, owner)
	if err != nil {
		return nil, err
	}
	credits := cr.Credits()
	budget := map[string]any{"spent": spent, "limit": nil, "balance": nil, "allowed": true}
	verdict := "the daily budget allows it"
	if limit := t.cfg.Budget(ctx, owner); limit != nil {
		bal := max(*limit-spent, 0)
		ok := credits <= *limit-spent
		budget["limit"], budget["balance"], budget["allowed"] = *limit, bal, ok
		verdict = fmt.Sprintf("within today's balance of %s", words.Count(bal, "credit"))
		if !ok {
			verdict = fmt.Sprintf("over today's balance of %s: it would be refused", words.Count(bal, "credit"))
		}
	}
	var threshold *int64
	if t.cfg.ApprovalAbove != nil {
		threshold = t.cfg.ApprovalAbove(ctx)
	}
	required := NeedsApproval(credits, threshold)
	approval := map[string]any{"threshold": threshold, "required": required} // nil: null
	out := map[string]any{
		"dryRun": true, "modelId": m.ID, "kind": m.Kind, "count": cr.Count,
		"creditsPerOutput": m.Credits, "credits": credits, "budget": budget, "approval": approval,
	}
	text := fmt.Sprintf("Dry run: %s would make %s for %s (%d each), %s", m.ID, words.Count(cr.Count, string(m.Kind)+" output"), words.Count(credits, "credit"), m.Credits, verdict)
	if required {
		text += fmt.Sprintf("; above your approval threshold of %d, so it would ask for approval (or confirmSpend:true)", *threshold)
	}
	return structured(text+". Nothing was created or charged.", out), nil
}
