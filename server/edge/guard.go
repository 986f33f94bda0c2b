package edge

import (
	"github.com/darkroom-mcp/darkroom/internal/edgecount"
	"github.com/darkroom-mcp/darkroom/internal/envelope"
	"github.com/darkroom-mcp/darkroom/tasks"
)

// guard is a lean call's one handler run (edgecount.Handler): run calls
// the handler (and a keyed read's Render), and a panic in it is
// tasks.Recovered's -32603, answered as it is (fail).
func (en *Engine) guard(env *envelope.Envelope, run func() error) (err error) {
	edgecount.Handler()
	defer func() {
		if v := recover(); v != nil {
			err = tasks.Recovered(en.log, env.Method, env.Name, v)
		}
	}()
	return run()
}
