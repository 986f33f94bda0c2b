package httpx

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/darkroom-mcp/darkroom/provider"
)

// Ping GETs url (a cheap listing) and maps the answer: nil for 2xx, the
// Err mapping otherwise, a RetryableError for a transport failure.
func (c *Client) Ping(ctx context.Context, url string) error {
	resp, err := c.Do(ctx, Other, http.MethodGet, url, nil, nil)
	if err != nil {
		return err
	}
	return c.Err(resp)
}

// GetJSON reads url's JSON reply into v: a refusal is Err's error, an
// unreadable reply a RetryableError (the vendor may answer well next
// time).
func (c *Client) GetJSON(ctx context.Context, url string, v any) error {
	resp, err := c.Do(ctx, Other, http.MethodGet, url, nil, nil)
	if err != nil {
		return err
	}
	if err := c.Err(resp); err != nil {
		return err
	}
	if err := json.Unmarshal(resp.Body, v); err != nil {
		return &provider.RetryableError{Err: fmt.Errorf("%s: unreadable reply: %w", c.cfg.Provider, err)}
	}
	return nil
}
