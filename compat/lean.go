package compat

import "github.com/modelcontextprotocol/go-sdk/mcp"

// Reads returns the handlers of the read-only poll tools by name, the
// same ones Register gives go-sdk, for a path that serves them below it
// (tasks.Dispatcher.ServeRead): they change nothing, so running one and
// then letting go-sdk run it again is harmless.
func (t *Tools) Reads() map[string]mcp.ToolHandler {
	return map[string]mcp.ToolHandler{
		"get_generation":   t.getGeneration,
		"list_generations": t.listGenerations,
		"download_output":  t.downloadOutput,
		"get_credits":      t.getCredits,
	}
}
