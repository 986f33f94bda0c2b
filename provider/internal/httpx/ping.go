package httpx

import (
	"context"
	"net/http"
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
