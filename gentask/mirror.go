package gentask

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/darkroom-mcp/darkroom/generation"
	"github.com/darkroom-mcp/darkroom/gentools"
	"github.com/darkroom-mcp/darkroom/internal/caches"
	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// refPrefix marks tasks that follow a generation.
const refPrefix = "generation"

func genRef(id string) string { return refPrefix + ":" + id }

// Mirror keeps each generation's task row in step with it: generation's
// Observer, inside the generation's own transaction.
type Mirror struct {
	D *tasks.Dispatcher
	// ids remembers which task follows a generation, which never changes
	// (caches.TaskIndex): a status change then finds its task by id,
	// without a search by ref. A miss searches.
	ids *caches.Bounded[string, string]
}

// NewMirror returns the mirror of generations onto d's tasks.
func NewMirror(d *tasks.Dispatcher) *Mirror {
	return &Mirror{D: d, ids: caches.New(caches.TaskIndex, caches.Options[string, string]{Size: func(g, t string) int { return len(g) + len(t) }})}
}

// task finds the task following a generation, inside tx when non-nil.
func (g *Mirror) task(ctx context.Context, tx tasks.Tx, genID string) (*tasks.Task, error) {
	store := g.D.Store()
	if id, ok := g.ids.Get(genID); ok {
		if tx != nil {
			return store.GetTx(ctx, tx, id)
		}
		return store.Get(ctx, id)
	}
	t, err := store.ByRef(ctx, tx, genRef(genID))
	if err == nil {
		g.ids.Put(genID, t.ID)
	}
	return t, err
}

// taskStatus is the status mapping of a generation onto its task, as
// data: a failure is a tool error (completed, result.isError) when the
// provider refused, and a task failure when darkroom failed.
var taskStatus = []struct {
	gen  generation.Status
	kind generation.ErrorKind // for failed only
	task tasks.Status
}{
	{generation.StatusReserved, "", tasks.StatusWorking}, // input_required while the approval is asked (see Changed)
	{generation.StatusQueued, "", tasks.StatusWorking},
	{generation.StatusRunning, "", tasks.StatusWorking},
	{generation.StatusCompleted, "", tasks.StatusCompleted},
	{generation.StatusFailed, generation.ErrorProvider, tasks.StatusCompleted},
	{generation.StatusFailed, generation.ErrorInternal, tasks.StatusFailed},
	{generation.StatusFailed, generation.ErrorExpired, tasks.StatusFailed},
	{generation.StatusCancelled, "", tasks.StatusCancelled},
}

// TaskStatus maps a generation's status (and, when failed, its error
// kind) onto its task's status.
func TaskStatus(gen *generation.Generation) (tasks.Status, bool) {
	for _, m := range taskStatus {
		if m.gen == gen.Status && (m.kind == "" || m.kind == gen.ErrorKind) {
			return m.task, true
		}
	}
	return "", false
}

// unitOfWork is the task side of a generation's transaction: engines
// give one transaction that serves both stores.
func unitOfWork(tx generation.Tx) (tasks.Tx, error) {
	ttx, ok := tx.(tasks.Tx)
	if !ok {
		return nil, fmt.Errorf("gentask: the generation store's transaction %T is not a task store transaction", tx)
	}
	return ttx, nil
}

// Changed keeps the task row in step with its generation, inside the
// generation's write transaction. Terminal task states never change: the
// store's compare-and-set refuses.
func (g *Mirror) Changed(ctx context.Context, gtx generation.Tx, gen *generation.Generation) error {
	tx, err := unitOfWork(gtx)
	if err != nil {
		return err
	}
	store := g.D.Store()
	t, err := g.task(ctx, tx, gen.ID)
	if errors.Is(err, tasks.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	status, ok := TaskStatus(gen)
	if !ok {
		return fmt.Errorf("gentask: no task status for generation status %q (%q)", gen.Status, gen.ErrorKind)
	}
	switch {
	case gen.Status == generation.StatusReserved && len(t.InputRequests) > 0:
		return nil // still waiting for the approval answer
	case !status.Terminal():
		msg := statusMessage(gen)
		if gen.Status != generation.StatusReserved {
			t.InputRequests = nil
		}
		_, err = store.SetActive(ctx, tx, t, status, msg)
	case status == tasks.StatusFailed:
		_, err = store.Finish(ctx, tx, t.ID, status, gen.StatusMessage, nil,
			&tasks.Error{Code: tasks.CodeInternal, Message: gen.ErrorMessage})
	default:
		// A completed result carries links minted per read: rendered by
		// Result.
		_, err = store.Finish(ctx, tx, t.ID, status, gen.StatusMessage, nil, nil)
	}
	return err
}

// statusMessage is a live task's status message: the generation's headline,
// except that one waiting for its input image names its generationId,
// which upload_input takes and a Tasks client, holding only the taskId,
// has nowhere else.
func statusMessage(gen *generation.Generation) string {
	if gen.UploadRequired() && !gen.Params.AwaitsApproval {
		return fmt.Sprintf("%s call upload_input with generationId %s and %s", uploadPrefix, gen.ID, gentools.UploadRoles(gen.AwaitedRoles()))
	}
	if gen.Previewing() && gen.PreviewFrames > 0 {
		// A working task carries nothing else (the spec, §5.2): its
		// message names the live preview, which resources/read serves.
		return fmt.Sprintf("%s · preview %s: %s", gen.Headline(), words.Count(gen.PreviewFrames, "frame"), gentools.PreviewURI(gen.ID))
	}
	return gen.Headline()
}

// uploadPrefix begins the status message of a task whose generation
// waits for an upload_input: nothing but that call moves it on.
const uploadPrefix = "Waiting for an upload:"

// WaitsForUpload reports whether a task's status message says it waits
// for an upload_input (a client that cannot upload stops waiting).
func WaitsForUpload(statusMessage string) bool { return strings.HasPrefix(statusMessage, uploadPrefix) }

// Notify pushes a committed generation change to task listeners.
func (g *Mirror) Notify(genID string) {
	if id, ok := g.ids.Get(genID); ok {
		g.D.Store().Notify(id)
		return
	}
	if t, err := g.task(context.Background(), nil, genID); err == nil {
		g.D.Store().Notify(t.ID)
	}
}
