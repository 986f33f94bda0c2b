package rows

import (
	"database/sql"
	"encoding/json"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// The parameters of the write statements both engines share, in the
// order sqlc generates them (the order the queries name them in).
type (
	InsertGenerationParams = struct {
		ID, Owner, ModelID, Provider, Kind, Prompt, Params, ArgsHash string
		Credits, Charged                                             int64
		Status, StatusMessage                                        string
		IdempotencyKey                                               sql.NullString
		CreatedAt, UpdatedAt                                         int64
		NextCheckAt                                                  sql.NullInt64
	}
	ListGenerationsParams = struct {
		Owner, Status string
		BeforeCreated int64
		BeforeID      string
		Lim           int64
	}
	InsertDeliveryParams = struct {
		Provider, DeliveryID, GenerationID, Event string
		ReceivedAt                                int64
	}
	InsertTaskParams = struct {
		TaskID, Owner, Ref, Status, StatusMessage string
		CreatedAt, LastUpdatedAt                  int64
		TtlMs                                     sql.NullInt64
		PollIntervalMs                            int64
		ExpiresAt                                 sql.NullInt64
		InputRequests                             string
		KeySeq                                    int64
		Result, Error                             sql.NullString
		ClientCaps                                string
	}
	SetTaskActiveParams = struct {
		Status, StatusMessage, InputRequests string
		KeySeq, PollIntervalMs, Now          int64
		TaskID                               string
	}
	SetTaskAnswersParams = struct {
		InputRequests, AnsweredKeys, InputResponses string
		Now                                         int64
		TaskID                                      string
	}
	FinishTaskParams = struct {
		Status, StatusMessage string
		Result, Error         sql.NullString
		Now                   int64
		TaskID                string
	}
)

// InsertGeneration is InsertGeneration's parameters for r.
func InsertGeneration(r generation.Row) InsertGenerationParams {
	return InsertGenerationParams{
		ID: r.ID, Owner: r.Owner, ModelID: r.ModelID, Provider: r.Provider, Kind: r.Kind, Prompt: r.Prompt,
		Params: r.Params, ArgsHash: r.ArgsHash, Credits: r.Credits, Charged: r.Charged, Status: string(r.Status),
		StatusMessage: r.StatusMessage, IdempotencyKey: sql.NullString{String: r.IdempotencyKey, Valid: r.IdempotencyKey != ""},
		CreatedAt: r.CreatedAt.UnixMilli(), UpdatedAt: r.UpdatedAt.UnixMilli(), NextCheckAt: NullTime(r.NextCheckAt),
	}
}

// ListGenerations is ListGenerations' parameters for q.
func ListGenerations(q generation.ListQuery) ListGenerationsParams {
	return ListGenerationsParams{
		Owner: q.Owner, Status: string(q.Status), BeforeCreated: q.BeforeCreated, BeforeID: q.BeforeID, Lim: int64(q.Limit),
	}
}

// InsertDelivery is InsertDelivery's parameters for d.
func InsertDelivery(d generation.Delivery) InsertDeliveryParams {
	return InsertDeliveryParams{
		Provider: d.Provider, DeliveryID: d.DeliveryID, GenerationID: d.GenerationID, Event: d.Event, ReceivedAt: d.ReceivedAt.UnixMilli(),
	}
}

// InsertTask is InsertTask's parameters for r.
func InsertTask(r tasks.Row) InsertTaskParams {
	return InsertTaskParams{
		TaskID: r.TaskID, Owner: r.Owner, Ref: r.Ref, Status: string(r.Status), StatusMessage: r.StatusMessage,
		CreatedAt: r.CreatedAt.UnixMilli(), LastUpdatedAt: r.LastUpdatedAt.UnixMilli(),
		TtlMs: nullDuration(r.TTL), PollIntervalMs: r.PollInterval.Milliseconds(), ExpiresAt: NullTime(r.ExpiresAt),
		InputRequests: r.InputRequests, KeySeq: r.KeySeq, Result: nullJSON(r.Result), Error: nullJSON(r.Error), ClientCaps: r.ClientCaps,
	}
}

// SetTaskActive is SetTaskActive's parameters for r.
func SetTaskActive(r tasks.Row) SetTaskActiveParams {
	return SetTaskActiveParams{
		TaskID: r.TaskID, Status: string(r.Status), StatusMessage: r.StatusMessage, InputRequests: r.InputRequests,
		KeySeq: r.KeySeq, PollIntervalMs: r.PollInterval.Milliseconds(), Now: r.LastUpdatedAt.UnixMilli(),
	}
}

// SetTaskAnswers is SetTaskAnswers' parameters for r.
func SetTaskAnswers(r tasks.Row) SetTaskAnswersParams {
	return SetTaskAnswersParams{
		TaskID: r.TaskID, InputRequests: r.InputRequests, AnsweredKeys: r.AnsweredKeys,
		InputResponses: r.InputResponses, Now: r.LastUpdatedAt.UnixMilli(),
	}
}

// FinishTask is FinishTask's parameters for r.
func FinishTask(r tasks.Row) FinishTaskParams {
	return FinishTaskParams{
		TaskID: r.TaskID, Status: string(r.Status), StatusMessage: r.StatusMessage,
		Result: nullJSON(r.Result), Error: nullJSON(r.Error), Now: r.LastUpdatedAt.UnixMilli(),
	}
}

func nullDuration(d time.Duration) sql.NullInt64 {
	return sql.NullInt64{Int64: d.Milliseconds(), Valid: d > 0}
}

func nullJSON(b json.RawMessage) sql.NullString {
	return sql.NullString{String: string(b), Valid: len(b) > 0}
}
