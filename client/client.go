// Package client is a small Go client for darkroom's tool calls under the
// MCP Tasks extension (io.modelcontextprotocol/tasks, protocol 2026-07-28).
//
// It speaks the stateless Streamable HTTP wire directly, on net/http and
// encoding/json: one POST per request to the MCP endpoint, with the
// per-request _meta (protocol version, client capabilities, client info)
// and the routing headers (MCP-Protocol-Version, Mcp-Method, Mcp-Name).
// Responses may come as one JSON object or as an SSE stream; both are read.
//
// CallTool handles the three result types of tools/call: "complete" (the
// CallToolResult), "input_required" (multi round-trip requests, answered
// through Options.OnInput) and "task" (a CreateTaskResult: the task is
// recorded in a small local SQLite state file, then polled with tasks/get
// until it ends). Input a task asks for while it runs is answered with
// tasks/update. Tasks left unfinished when the process died are picked up
// again by Resume.
package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"
)

// ProtocolVersion is the only MCP revision this client speaks.
const ProtocolVersion = "2026-07-28"

// ExtensionID names the Tasks extension in capabilities.extensions.
const ExtensionID = "io.modelcontextprotocol/tasks"

// DefaultPollInterval is used between polls when the server suggests none.
const DefaultPollInterval = time.Second

// DefaultMaxInputRounds bounds the input_required rounds of one tools/call.
const DefaultMaxInputRounds = 8

const (
	metaProtocolVersion    = "io.modelcontextprotocol/protocolVersion"
	metaClientCapabilities = "io.modelcontextprotocol/clientCapabilities"
	metaClientInfo         = "io.modelcontextprotocol/clientInfo"
	metaSubscriptionID     = "io.modelcontextprotocol/subscriptionId"
)

// InputFunc answers one input request: an elicitation/create (or other MRTR
// request kind) object {method, params}, exactly as the server sent it. It
// returns the response value for that key, e.g. for a form elicitation
// {"action":"accept","content":{...}} or {"action":"decline"}. taskID is
// empty for input asked before any task exists (MRTR on tools/call).
type InputFunc func(ctx context.Context, taskID, key string, request json.RawMessage) (json.RawMessage, error)

// Options configure a Client.
type Options struct {
	// Endpoint is the MCP endpoint URL, e.g. http://127.0.0.1:8080/mcp.
	Endpoint string
	// Token, when set, is sent as "Authorization: Bearer <Token>".
	Token string
	// HTTPClient sends the requests (default: a client without a
	// timeout; Listen streams are long-lived, so bound calls with their
	// context rather than http.Client.Timeout).
	HTTPClient *http.Client
	// StatePath is the SQLite file that records created tasks and the
	// input keys already answered, so that Resume can pick them up after
	// this process restarts. Empty keeps the state in memory only.
	StatePath string
	// OnInput answers input requests (MRTR rounds and a task's
	// input_required). When set, requests declare the elicitation
	// capability; when nil, input requests are errors (ErrNoInputHandler).
	OnInput InputFunc
	// Logger receives debug and warning records (default: discarded).
	Logger *slog.Logger
	// ClientName and ClientVersion fill clientInfo (defaults
	// "darkroom-client" and "dev").
	ClientName, ClientVersion string
	// MaxInputRounds bounds input_required rounds on one tools/call
	// (default DefaultMaxInputRounds).
	MaxInputRounds int
	// OnProgress, when set, is told each state of a followed task that
	// differs from the last one told (status or statusMessage), the
	// CreateTaskResult first. It runs on the waiting goroutine: keep it
	// short.
	OnProgress func(t *DetailedTask)
	// Blocked, when set, is asked about each live state of a followed
	// task: true when the task waits for something only another call can
	// give (darkroom: an upload_input). Wait, WaitByNotifications and
	// Resume then stop with a *BlockedError instead of waiting for ever;
	// the task stays pending on the server. A task asking for input with
	// no OnInput to answer it stops the same way.
	Blocked func(t *DetailedTask) bool
}

// Client calls tools on one MCP endpoint and follows the tasks they create.
// It is safe for concurrent use.
type Client struct {
	opts     Options
	endpoint string
	hc       *http.Client
	log      *slog.Logger
	meta     json.RawMessage
	state    *state
	nextID   atomic.Int64
}

// New returns a client for o.Endpoint, opening (or creating) the state file.
func New(o Options) (*Client, error) {
	u, err := url.Parse(o.Endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("client: endpoint %q is not an http(s) URL", o.Endpoint)
	}
	if o.HTTPClient == nil {
		o.HTTPClient = &http.Client{}
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.ClientName == "" {
		o.ClientName = "darkroom-client"
	}
	if o.ClientVersion == "" {
		o.ClientVersion = "dev"
	}
	if o.MaxInputRounds <= 0 {
		o.MaxInputRounds = DefaultMaxInputRounds
	}
	caps := map[string]any{"extensions": map[string]any{ExtensionID: map[string]any{}}}
	if o.OnInput != nil {
		caps["elicitation"] = map[string]any{}
	}
	meta, err := json.Marshal(map[string]any{
		metaProtocolVersion:    ProtocolVersion,
		metaClientCapabilities: caps,
		metaClientInfo:         map[string]any{"name": o.ClientName, "version": o.ClientVersion},
	})
	if err != nil {
		return nil, err
	}
	st, err := openState(o.StatePath)
	if err != nil {
		return nil, err
	}
	return &Client{opts: o, endpoint: u.String(), hc: o.HTTPClient, log: o.Logger, meta: meta, state: st}, nil
}

// Close releases the state file.
func (c *Client) Close() error { return c.state.close() }

// Status is a task's state.
type Status string

// The task statuses of the Tasks extension.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s never changes again.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

func (s Status) known() bool {
	return s == StatusWorking || s == StatusInputRequired || s.Terminal()
}

// DetailedTask is a task as tasks/get and notifications/tasks carry it.
type DetailedTask struct {
	TaskID        string    `json:"taskId"`
	Status        Status    `json:"status"`
	StatusMessage string    `json:"statusMessage,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	LastUpdatedAt time.Time `json:"lastUpdatedAt"`
	// TTLMs is the task's lifetime from CreatedAt; nil means unlimited.
	TTLMs          *int64 `json:"ttlMs"`
	PollIntervalMs int64  `json:"pollIntervalMs,omitempty"`
	// InputRequests are the outstanding requests (status input_required).
	InputRequests map[string]json.RawMessage `json:"inputRequests,omitempty"`
	// Result is the CallToolResult (status completed).
	Result json.RawMessage `json:"result,omitempty"`
	// Error is the JSON-RPC error (status failed).
	Error *RPCError `json:"error,omitempty"`
}

// ExpiresAt is CreatedAt + TTLMs (zero when the lifetime is unlimited).
func (t *DetailedTask) ExpiresAt() time.Time {
	if t.TTLMs == nil || t.CreatedAt.IsZero() {
		return time.Time{}
	}
	return t.CreatedAt.Add(time.Duration(*t.TTLMs) * time.Millisecond)
}

// PollInterval is the suggested poll period (DefaultPollInterval when the
// server suggests none).
func (t *DetailedTask) PollInterval() time.Duration {
	if t.PollIntervalMs <= 0 {
		return DefaultPollInterval
	}
	return time.Duration(t.PollIntervalMs) * time.Millisecond
}

// Outcome is what a tool call came to.
type Outcome struct {
	// TaskID names the task that ran the call; empty when the server
	// answered synchronously.
	TaskID string
	// Result is the CallToolResult (nil when the task has not completed,
	// as from Start, or ended failed or cancelled).
	Result json.RawMessage
	// Task is the last task state seen (nil when no task was made).
	Task *DetailedTask
}

// IsError reports whether Result is a tool error (isError:true).
func (o *Outcome) IsError() bool {
	var r struct {
		IsError bool `json:"isError"`
	}
	return o != nil && json.Unmarshal(o.Result, &r) == nil && r.IsError
}

// StructuredContent decodes Result's structuredContent into v.
func (o *Outcome) StructuredContent(v any) error {
	var r struct {
		StructuredContent json.RawMessage `json:"structuredContent"`
	}
	if o == nil || json.Unmarshal(o.Result, &r) != nil || len(r.StructuredContent) == 0 {
		return errors.New("client: result has no structuredContent")
	}
	return json.Unmarshal(r.StructuredContent, v)
}

// RPCError is a JSON-RPC error object.
type RPCError struct {
	Code    int64           `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data,omitempty"`
}

func (e *RPCError) Error() string {
	if len(e.Data) > 0 {
		return fmt.Sprintf("json-rpc error %d: %s (data %s)", e.Code, e.Message, e.Data)
	}
	return fmt.Sprintf("json-rpc error %d: %s", e.Code, e.Message)
}

// JSON-RPC error codes the client looks at.
const (
	CodeInvalidParams       = -32602
	CodeMethodNotFound      = -32601
	CodeInternalError       = -32603
	CodeHeaderMismatch      = -32020
	CodeMissingCapability   = -32021
	CodeUnsupportedProtocol = -32022
)

var (
	// ErrCancelled is returned when a task ended cancelled.
	ErrCancelled = errors.New("client: task cancelled")
	// ErrExpired is returned when a task had not ended by createdAt + ttlMs.
	ErrExpired = errors.New("client: task expired before it ended")
	// ErrTaskNotFound is returned when the server does not know the task
	// (unknown, expired or purged): tasks/get answered -32602.
	ErrTaskNotFound = errors.New("client: task not found")
	// ErrNoInputHandler is returned when the server asks for input and
	// Options.OnInput is nil.
	ErrNoInputHandler = errors.New("client: input requested but no OnInput handler is set")
	// ErrProtocol marks answers that break the protocol (an unknown
	// resultType, a nested CreateTaskResult, a bad subscription stream...).
	ErrProtocol = errors.New("client: protocol violation")
	// ErrStreamEnded is returned when an SSE stream ended before the
	// response it was carrying.
	ErrStreamEnded = errors.New("client: stream ended before the response")
)

// TaskFailedError is returned when a task ended failed; Err is the task's
// JSON-RPC error.
type TaskFailedError struct {
	TaskID string
	Err    *RPCError
}

func (e *TaskFailedError) Error() string {
	return fmt.Sprintf("client: task %s failed: %v", e.TaskID, e.Err)
}

func (e *TaskFailedError) Unwrap() error { return e.Err }

// BlockedError is returned when a followed task waits for something this
// client cannot give (Options.Blocked, or input without OnInput): it is
// still live on the server, and StatusMessage says what it waits for.
type BlockedError struct {
	TaskID        string
	Status        Status
	StatusMessage string
	// Err is ErrNoInputHandler for input this client cannot answer.
	Err error
}

func (e *BlockedError) Error() string {
	msg := e.StatusMessage
	if msg == "" {
		msg = "(no status message)"
	}
	return fmt.Sprintf("client: task %s is %s and waits for what this client cannot give: %s", e.TaskID, e.Status, msg)
}

func (e *BlockedError) Unwrap() error { return e.Err }

// HTTPError is an HTTP answer that carried no JSON-RPC message (e.g. 401,
// 403, or a proxy's 502).
type HTTPError struct {
	StatusCode int
	// WWWAuthenticate is the challenge of a 401 or 403.
	WWWAuthenticate string
	Body            string
}

func (e *HTTPError) Error() string {
	if e.Body != "" {
		return fmt.Sprintf("client: HTTP %d: %s", e.StatusCode, e.Body)
	}
	return fmt.Sprintf("client: HTTP %d", e.StatusCode)
}

func protocolErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrProtocol, fmt.Sprintf(format, args...))
}

// Discovery is what server/discover says.
type Discovery struct {
	SupportedVersions []string        `json:"supportedVersions"`
	Capabilities      json.RawMessage `json:"capabilities"`
	Instructions      string          `json:"instructions,omitempty"`
	// Tasks reports whether the server advertises the Tasks extension.
	Tasks bool `json:"-"`
}

// Discover calls server/discover.
func (c *Client) Discover(ctx context.Context) (*Discovery, error) {
	res, err := c.call(ctx, "server/discover", "", map[string]any{})
	if err != nil {
		return nil, err
	}
	if err := expectComplete(res, "server/discover"); err != nil {
		return nil, err
	}
	var d Discovery
	if err := json.Unmarshal(res, &d); err != nil {
		return nil, protocolErr("server/discover result: %v", err)
	}
	var caps struct {
		Extensions map[string]json.RawMessage `json:"extensions"`
	}
	_ = json.Unmarshal(d.Capabilities, &caps)
	_, d.Tasks = caps.Extensions[ExtensionID]
	return &d, nil
}
