// Command darkroom-conformance is the fixture server for the official MCP
// conformance suite. It registers the suite's fixture tools, resources and
// prompts on the same stack darkroom serves: go-sdk stateless Streamable
// HTTP behind the real tasks dispatcher and its SQL task store.
//
//	darkroom-conformance -addr 127.0.0.1:0 -data DIR
//	darkroom-conformance -addr 127.0.0.1:0 -database-url postgres://...
//
// With -database-url the task store is PostgreSQL, as darkroom's replicas
// use it: several fixture servers on one database behind a load balancer
// serve one set of tasks (the read cache keeps only terminal tasks, and
// each server's listener turns the others' changes into wake-ups). It
// prints "listening on http://ADDR/mcp" once ready.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"

	"github.com/darkroom-mcp/darkroom/server/edge"
	"github.com/darkroom-mcp/darkroom/storage/postgres"
	"github.com/darkroom-mcp/darkroom/storage/sqlite"
	"github.com/darkroom-mcp/darkroom/tasks"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address")
	data := flag.String("data", "", "data directory (default: a temporary one)")
	dbURL := flag.String("database-url", "", "postgres://... : PostgreSQL instead of SQLite in the data directory")
	flag.Parse()
	if err := run(*addr, *data, *dbURL); err != nil {
		log.Fatal(err)
	}
}

func run(addr, data, dbURL string) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if dbURL != "" {
		d, err := postgres.Open(ctx, dbURL)
		if err != nil {
			return err
		}
		defer d.Close()
		store := tasks.NewStore(d.Tasks(), nil, tasks.Shared(d.Fence().Fresh))
		done := make(chan struct{})
		go func() {
			defer close(done)
			d.Listen(ctx, postgres.Listener{Task: store.NotifyVersion, Connected: store.FlushLive, Resync: store.NotifyAll})
		}()
		defer func() { stop(); <-done }()
		return serve(ctx, addr, newHandler(store))
	}
	if data == "" {
		dir, err := os.MkdirTemp("", "darkroom-conformance")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		data = dir
	}
	d, err := sqlite.Open(ctx, filepath.Join(data, "conformance.db"))
	if err != nil {
		return err
	}
	defer d.Close()
	return serve(ctx, addr, newHandler(tasks.NewStore(d.Tasks(), nil)))
}

func serve(ctx context.Context, addr string, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	fmt.Printf("listening on http://%s/mcp\n", ln.Addr())
	if err := srv.Serve(ln); err != http.ErrServerClosed {
		return err
	}
	return nil
}

// newHandler builds the fixture server's HTTP handler on store.
func newHandler(store *tasks.Store) http.Handler {
	info := &mcp.Implementation{Name: "darkroom-conformance", Version: "1.0.0"}
	disp := tasks.NewDispatcher(tasks.Options{Store: store, ServerInfo: info})
	//lint:ignore SA1019 the core scenarios still exercise logging, deprecated but served for twelve months
	caps := &mcp.ServerCapabilities{Logging: &mcp.LoggingCapabilities{}}
	caps.AddExtension(tasks.ExtensionID, nil)
	s := mcp.NewServer(info, &mcp.ServerOptions{Capabilities: caps, CompletionHandler: completeFixture})
	s.AddReceivingMiddleware(tasks.SDKMiddleware())
	lean := edge.New(disp, edge.Options{})
	registerTaskFixtures(s, disp, lean)
	registerCore(s)
	sdk := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{Stateless: true})
	owner := func(*http.Request) string { return "conformance" }
	mux := http.NewServeMux()
	mux.Handle("/mcp", lean.Middleware(owner, 4<<20)(sdk))
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}
