// Package rows is the one row mapping of both SQL engines: it turns the
// rows their sqlc queries read into the domain's rows (generation.Row,
// tasks.Row, generation.Delivery), and the domain's rows into the write
// statements' parameters.
//
// Each type here is an alias of an unnamed struct type, spelled as sqlc
// generates it for both engines (sqlfiles/sqlc.yaml gives PostgreSQL's
// nullable columns database/sql's types, and the queries cast LIMIT to
// bigint). Go assigns a generated struct to such a type, and back, only
// while the two have the same fields in the same order with the same
// types: every engine call that passes a generated row here is the
// compile-time check that the two schemas have not drifted.
package rows

import (
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// Generation is a whole generations row (pgdb.Generation; the SQLite
// queries name the columns in this order).
type Generation = struct {
	ID, Owner, ModelID, Provider, Kind, Prompt, Params, ArgsHash string
	Credits, Charged                                             int64
	Status, StatusMessage                                        string
	Progress                                                     float64
	SubmitState, ProviderJob, ProviderJobID                      string
	SubmittedAt                                                  int64
	Outputs                                                      string
	OutputsExpired                                               int64
	ErrorKind, ErrorMessage                                      string
	IdempotencyKey                                               sql.NullString
	CancelRequested, CreatedAt, UpdatedAt                        int64
	NextCheckAt                                                  sql.NullInt64
	Attempts                                                     int64
	LeaseOwner                                                   string
	LeaseUntil                                                   int64
	Version                                                      int64 // only grows: kept by a trigger on every update
}

// Task is a whole tasks row.
type Task = struct {
	TaskID, Owner, Ref, Status, StatusMessage   string
	CreatedAt, LastUpdatedAt                    int64
	TtlMs                                       sql.NullInt64
	PollIntervalMs                              int64
	ExpiresAt                                   sql.NullInt64
	InputRequests, AnsweredKeys, InputResponses string
	KeySeq                                      int64
	Result, Error                               sql.NullString
	ClientCaps                                  string
	Version                                     int64 // only grows: kept by a trigger on every update
}

// Reader reads the rows of one engine: NoRows is its driver's error for
// a query that found no row.
type Reader struct{ NoRows error }

// Generation is a generation query's outcome as the domain's: no row is
// generation.ErrNotFound.
func (rd Reader) Generation(r Generation, err error) (generation.Row, error) {
	return found(rd, r, err, generation.ErrNotFound, ToGeneration)
}

// Claim is ClaimDue's outcome: no row is nothing due (false, no error).
func (rd Reader) Claim(r Generation, err error) (generation.Row, bool, error) {
	g, err := rd.Generation(r, err)
	if errors.Is(err, generation.ErrNotFound) {
		return g, false, nil
	}
	return g, err == nil, err
}

// Task is a task query's outcome as the domain's: no row is
// tasks.ErrNotFound.
func (rd Reader) Task(r Task, err error) (tasks.Row, error) {
	return found(rd, r, err, tasks.ErrNotFound, ToTask)
}

// found is a one-row query's outcome mapped by f: no row is notFound.
func found[R, T any](rd Reader, r R, err, notFound error, f func(R) T) (T, error) {
	var zero T
	switch {
	case errors.Is(err, rd.NoRows):
		return zero, notFound
	case err != nil:
		return zero, err
	}
	return f(r), nil
}

// ToGeneration is a generations row as the domain's.
func ToGeneration(r Generation) generation.Row {
	return generation.Row{
		ID: r.ID, Owner: r.Owner, ModelID: r.ModelID, Provider: r.Provider, Kind: r.Kind, Prompt: r.Prompt,
		Params: r.Params, ArgsHash: r.ArgsHash, Credits: r.Credits, Charged: r.Charged,
		Status: generation.Status(r.Status), StatusMessage: r.StatusMessage, Progress: r.Progress,
		SubmitState: r.SubmitState, ProviderJob: r.ProviderJob, ProviderJobID: r.ProviderJobID,
		Outputs: r.Outputs, OutputsExpired: r.OutputsExpired != 0,
		ErrorKind: generation.ErrorKind(r.ErrorKind), ErrorMessage: r.ErrorMessage,
		IdempotencyKey: r.IdempotencyKey.String, CancelRequested: r.CancelRequested,
		CreatedAt: time.UnixMilli(r.CreatedAt), UpdatedAt: time.UnixMilli(r.UpdatedAt),
		SubmittedAt: fromZero(r.SubmittedAt), NextCheckAt: fromNull(r.NextCheckAt),
		Attempts: r.Attempts, LeaseOwner: r.LeaseOwner, LeaseUntil: fromZero(r.LeaseUntil),
		Version: r.Version,
	}
}

// Generations is ListGenerations' outcome as the domain's rows.
func Generations[R ~Generation](rs []R, err error) ([]generation.Row, error) {
	return each(rs, err, func(r R) generation.Row { return ToGeneration(Generation(r)) })
}

// ToTask is a tasks row as the domain's.
func ToTask(r Task) tasks.Row {
	out := tasks.Row{
		TaskID: r.TaskID, Owner: r.Owner, Ref: r.Ref, Status: tasks.Status(r.Status), StatusMessage: r.StatusMessage,
		CreatedAt: time.UnixMilli(r.CreatedAt), LastUpdatedAt: time.UnixMilli(r.LastUpdatedAt),
		PollInterval: time.Duration(r.PollIntervalMs) * time.Millisecond, ExpiresAt: fromNull(r.ExpiresAt),
		InputRequests: r.InputRequests, AnsweredKeys: r.AnsweredKeys, InputResponses: r.InputResponses,
		KeySeq: r.KeySeq, ClientCaps: r.ClientCaps, Version: r.Version,
	}
	if r.TtlMs.Valid {
		out.TTL = time.Duration(r.TtlMs.Int64) * time.Millisecond
	}
	if r.Result.Valid {
		out.Result = json.RawMessage(r.Result.String)
	}
	if r.Error.Valid {
		out.Error = json.RawMessage(r.Error.String)
	}
	return out
}

// The rows of the queries that read a few columns.
type (
	outputs  = struct{ ID, Outputs string } // OutputsToExpire
	purge    = struct{ ID, Params string }  // GenerationsToPurge
	delivery = struct {
		Seq   int64
		Event string
	} // PendingDeliveries
	expiredRef = struct{ TaskID, Ref string } // ExpiredLiveTasks
)

// OutputsToExpire is OutputsToExpire's outcome: rows with ID and Outputs.
func OutputsToExpire[R ~outputs](rs []R, err error) ([]generation.Row, error) {
	return each(rs, err, func(r R) generation.Row { return generation.Row{ID: outputs(r).ID, Outputs: outputs(r).Outputs} })
}

// ToPurge is GenerationsToPurge's outcome: rows with ID and Params.
func ToPurge[R ~purge](rs []R, err error) ([]generation.Row, error) {
	return each(rs, err, func(r R) generation.Row { return generation.Row{ID: purge(r).ID, Params: purge(r).Params} })
}

// Deliveries is PendingDeliveries' outcome for the generation genID.
func Deliveries[R ~delivery](genID string, rs []R, err error) ([]generation.Delivery, error) {
	return each(rs, err, func(r R) generation.Delivery {
		return generation.Delivery{Seq: delivery(r).Seq, GenerationID: genID, Event: delivery(r).Event}
	})
}

// ExpiredTasks is ExpiredLiveTasks' outcome: rows with TaskID and Ref.
func ExpiredTasks[R ~expiredRef](rs []R, err error) ([]tasks.Row, error) {
	return each(rs, err, func(r R) tasks.Row { return tasks.Row{TaskID: expiredRef(r).TaskID, Ref: expiredRef(r).Ref} })
}

func each[R, T any](rs []R, err error, f func(R) T) ([]T, error) {
	if err != nil {
		return nil, err
	}
	out := make([]T, len(rs))
	for i, r := range rs {
		out[i] = f(r)
	}
	return out, nil
}

// Changed is an :execrows statement's outcome: true when it changed the
// one row it names.
func Changed(n int64, err error) (bool, error) { return n == 1, err }

// Due is NextDueAt's outcome: the zero time for none.
func Due(ms int64, err error) (time.Time, error) {
	if err != nil {
		return time.Time{}, err
	}
	return fromZero(ms), nil
}

// Flag is b as an INTEGER flag: 1 or 0.
func Flag(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// NullTime is t in unix ms, NULL for the zero time.
func NullTime(t time.Time) sql.NullInt64 {
	return sql.NullInt64{Int64: t.UnixMilli(), Valid: !t.IsZero()}
}

// fromZero reads a NOT NULL time column whose 0 means "not yet".
func fromZero(ms int64) time.Time {
	if ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}

func fromNull(v sql.NullInt64) time.Time {
	if !v.Valid {
		return time.Time{}
	}
	return time.UnixMilli(v.Int64)
}

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
