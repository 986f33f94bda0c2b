package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// registerCoreResources registers the test:// resources and template.
// Unknown URIs are answered by go-sdk with -32602 and data.uri (SEP-2164).
func registerCoreResources(s *mcp.Server) {
	static := func(c mcp.ResourceContents) mcp.ResourceHandler {
		return func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			fresh := c // go-sdk may fill in fields of what we return
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{&fresh}}, nil
		}
	}
	for _, r := range []struct {
		res     mcp.Resource
		content mcp.ResourceContents
	}{
		{mcp.Resource{URI: "test://static-text", Name: "static-text", Description: "A static text resource.", MIMEType: "text/plain"},
			mcp.ResourceContents{Text: "This is the content of the static text resource."}},
		{mcp.Resource{URI: "test://static-binary", Name: "static-binary", Description: "A static PNG image.", MIMEType: "image/png"},
			mcp.ResourceContents{Blob: pngPixel}},
	} {
		r.content.URI, r.content.MIMEType = r.res.URI, r.res.MIMEType
		s.AddResource(&r.res, static(r.content))
	}
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: "test://template/{id}/data", Name: "template",
		Description: "JSON data for the id in the URI.", MIMEType: "application/json"}, templateData)
}

func templateData(_ context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	uri := req.Params.URI
	rest, prefixed := strings.CutPrefix(uri, "test://template/")
	id, suffixed := strings.CutSuffix(rest, "/data")
	if !prefixed || !suffixed || id == "" || strings.Contains(id, "/") {
		return nil, mcp.ResourceNotFoundError(uri)
	}
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "application/json",
		Text: fmt.Sprintf(`{"id":%q,"templateTest":true,"data":"Data for ID: %s"}`, id, id)}}}, nil
}

// registerCorePrompts registers the test_* prompts.
func registerCorePrompts(s *mcp.Server) {
	user := func(c mcp.Content) *mcp.PromptMessage { return &mcp.PromptMessage{Role: "user", Content: c} }
	text := func(s string) *mcp.PromptMessage { return user(&mcp.TextContent{Text: s}) }
	arg := func(name, desc string) *mcp.PromptArgument {
		return &mcp.PromptArgument{Name: name, Description: desc, Required: true}
	}
	for _, p := range []struct {
		prompt  mcp.Prompt
		handler func(args map[string]string) []*mcp.PromptMessage
	}{
		{mcp.Prompt{Name: "test_simple_prompt", Title: "Simple prompt", Description: "A prompt without arguments."},
			func(map[string]string) []*mcp.PromptMessage {
				return []*mcp.PromptMessage{text("This is a simple prompt for testing.")}
			}},
		{mcp.Prompt{Name: "test_prompt_with_arguments", Title: "Prompt with arguments", Description: "A prompt that substitutes two arguments.",
			Arguments: []*mcp.PromptArgument{arg("arg1", "First argument"), arg("arg2", "Second argument")}},
			func(a map[string]string) []*mcp.PromptMessage {
				return []*mcp.PromptMessage{text(fmt.Sprintf("Prompt with arguments: arg1=%q, arg2=%q", a["arg1"], a["arg2"]))}
			}},
		{mcp.Prompt{Name: "test_prompt_with_embedded_resource", Title: "Prompt with embedded resource", Description: "A prompt that embeds a resource.",
			Arguments: []*mcp.PromptArgument{arg("resourceUri", "URI of the resource to embed")}},
			func(a map[string]string) []*mcp.PromptMessage {
				return []*mcp.PromptMessage{
					user(&mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: a["resourceUri"], MIMEType: "text/plain",
						Text: "Embedded resource content for testing."}}),
					text("Please process the embedded resource above."),
				}
			}},
		{mcp.Prompt{Name: "test_prompt_with_image", Title: "Prompt with image", Description: "A prompt that includes an image."},
			func(map[string]string) []*mcp.PromptMessage {
				return []*mcp.PromptMessage{user(&mcp.ImageContent{Data: pngPixel, MIMEType: "image/png"}), text("Please describe the image above.")}
			}},
	} {
		render := p.handler
		s.AddPrompt(&p.prompt, func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: p.prompt.Description, Messages: render(req.Params.Arguments)}, nil
		})
	}
	s.AddPrompt(&mcp.Prompt{Name: "test_input_required_result_prompt", Title: "Prompt needing input",
		Description: "Asks for context by in-band elicitation before rendering (MRTR)."}, askContext)
}
