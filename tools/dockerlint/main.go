// Command dockerlint runs BuildKit's Dockerfile checks (the rule set behind
// `docker build --check`) without a Docker engine, buildx or network access.
//
//	dockerlint [-context DIR] [-build-arg K=V]... [-target STAGE] [Dockerfile...]
//
// It prints findings in the same format as `docker build --check` and exits
// 1 if there are any (or the Dockerfile does not parse), 0 if clean and 2 on
// usage or I/O errors. The build context (default: the Dockerfile's
// directory) is only read for its .dockerignore, for CopyIgnoredFile.
//
// Base images are never pulled: every FROM resolves to a stub config with no
// ENV beyond the default PATH, so UndefinedVar cannot see variables a real
// base image would define.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/containerd/platforms"
	"github.com/moby/buildkit/client/llb"
	"github.com/moby/buildkit/client/llb/sourceresolver"
	"github.com/moby/buildkit/frontend/dockerfile/dockerfile2llb"
	"github.com/moby/buildkit/frontend/dockerui"
	gwclient "github.com/moby/buildkit/frontend/gateway/client"
	gwpb "github.com/moby/buildkit/frontend/gateway/pb"
	"github.com/moby/buildkit/frontend/subrequests/lint"
	"github.com/moby/buildkit/solver/pb"
	digest "github.com/opencontainers/go-digest"
	ocispecs "github.com/opencontainers/image-spec/specs-go/v1"
	fstypes "github.com/tonistiigi/fsutil/types"
)

type buildArgs []string

func (b *buildArgs) String() string { return strings.Join(*b, ",") }
func (b *buildArgs) Set(v string) error {
	if !strings.Contains(v, "=") {
		return fmt.Errorf("want KEY=VALUE, got %q", v)
	}
	*b = append(*b, v)
	return nil
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("dockerlint", flag.ContinueOnError)
	fset.SetOutput(stderr)
	contextDir := fset.String("context", "", "build context `dir`, read for .dockerignore (default: the Dockerfile's directory)")
	target := fset.String("target", "", "lint only this `stage` and its dependencies (default: all stages)")
	var bargs buildArgs
	fset.Var(&bargs, "build-arg", "build argument `KEY=VALUE` (repeatable)")
	if err := fset.Parse(args); err != nil {
		return 2
	}
	files := fset.Args()
	if len(files) == 0 {
		files = []string{"Dockerfile"}
	}
	status := 0
	for _, f := range files {
		n, err := lintFile(context.Background(), f, *contextDir, *target, bargs, stdout)
		if err != nil {
			fmt.Fprintf(stderr, "dockerlint: %s: %v\n", f, err)
			return 2
		}
		if n > 0 {
			status = 1
		}
	}
	return status
}

// lintFile lints one Dockerfile and prints the findings; it returns their
// number (a parse or build error counts as one).
func lintFile(ctx context.Context, path, contextDir, target string, bargs []string, w io.Writer) (int, error) {
	dt, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if contextDir == "" {
		contextDir = filepath.Dir(path)
	}
	res, err := Lint(ctx, path, dt, contextDir, target, bargs)
	if err != nil {
		return 0, err
	}
	if err := res.PrintTo(w, nil); err != nil {
		return 0, err
	}
	n := len(res.Warnings)
	if res.Error != nil {
		fmt.Fprintln(w)
		fmt.Fprint(w, "ERROR: ")
		res.PrintErrorTo(w, nil)
		n++
	}
	switch {
	case res.Error != nil:
		fmt.Fprintf(w, "\n%s: check failed: build error and %d warning(s).\n", path, len(res.Warnings))
	case n > 0:
		fmt.Fprintf(w, "\n%s: check complete, %d warning(s) found.\n", path, n)
	default:
		fmt.Fprintf(w, "%s: check complete, no warnings found.\n", path)
	}
	return n, nil
}

// Lint runs dockerfile2llb.DockerfileLint on dt the way the dockerfile
// frontend does for `docker build --check`, with an offline gateway client.
func Lint(ctx context.Context, name string, dt []byte, contextDir, target string, bargs []string) (*lint.LintResults, error) {
	ignore, err := os.ReadFile(filepath.Join(contextDir, ".dockerignore"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	opts := map[string]string{}
	if target != "" {
		opts["target"] = target
	}
	for _, a := range bargs {
		k, v, _ := strings.Cut(a, "=")
		opts["build-arg:"+k] = v
	}
	gw := &offlineClient{dockerignore: ignore, opts: opts}
	bc, err := dockerui.NewClient(gw)
	if err != nil {
		return nil, err
	}
	// Gotcha 1: the source map needs a Definition, or AddSource panics.
	sm := llb.NewSourceMap(nil, filepath.Base(name), "Dockerfile", dt)
	sm.Definition, err = llb.Scratch().Marshal(ctx)
	if err != nil {
		return nil, err
	}
	return dockerfile2llb.DockerfileLint(ctx, dt, dockerfile2llb.ConvertOpt{
		Config:    bc.Config,
		Client:    bc,
		SourceMap: sm,
		// Gotcha 2: without a stub it resolves every FROM over the network.
		MetaResolver: gw,
	})
}

// offlineClient is the slice of a BuildKit gateway client the Dockerfile
// frontend needs for linting: it answers image config lookups with a stub
// and serves the context's .dockerignore for every local source.
type offlineClient struct {
	dockerignore []byte // nil if the context has none
	opts         map[string]string
}

func (c *offlineClient) BuildOpts() gwclient.BuildOpts {
	return gwclient.BuildOpts{
		Opts:    c.opts,
		Caps:    gwpb.Caps.CapSet(gwpb.Caps.All()),
		LLBCaps: pb.Caps.CapSet(pb.Caps.All()),
		Workers: []gwclient.WorkerInfo{{Platforms: []ocispecs.Platform{platforms.DefaultSpec()}}},
	}
}

func (c *offlineClient) ResolveImageConfig(_ context.Context, ref string, opt sourceresolver.Opt) (string, digest.Digest, []byte, error) {
	p := platforms.DefaultSpec()
	if opt.ImageOpt != nil && opt.ImageOpt.Platform != nil {
		p = *opt.ImageOpt.Platform
	}
	cfg, err := json.Marshal(ocispecs.Image{Platform: p})
	return ref, "", cfg, err
}

func (c *offlineClient) ResolveSourceMetadata(ctx context.Context, op *pb.SourceOp, opt sourceresolver.Opt) (*sourceresolver.MetaResponse, error) {
	ref, ok := strings.CutPrefix(op.Identifier, "docker-image://")
	if !ok {
		return nil, fmt.Errorf("offline: cannot resolve %s", op.Identifier)
	}
	_, dgst, cfg, err := c.ResolveImageConfig(ctx, ref, opt)
	if err != nil {
		return nil, err
	}
	return &sourceresolver.MetaResponse{Op: op, Image: &sourceresolver.ResolveImageResponse{Digest: dgst, Config: cfg}}, nil
}

func (c *offlineClient) Solve(context.Context, gwclient.SolveRequest) (*gwclient.Result, error) {
	res := gwclient.NewResult()
	res.SetRef(ignoreRef{c.dockerignore})
	return res, nil
}

func (c *offlineClient) Inputs(context.Context) (map[string]llb.State, error) { return nil, nil }

func (c *offlineClient) NewContainer(context.Context, gwclient.NewContainerRequest) (gwclient.Container, error) {
	return nil, errors.New("offline: no containers")
}

func (c *offlineClient) Warn(context.Context, digest.Digest, string, gwclient.WarnOpts) error {
	return nil
}

// ignoreRef is a solved local source holding only .dockerignore.
type ignoreRef struct{ data []byte }

func (r ignoreRef) ToState() (llb.State, error)    { return llb.Scratch(), nil }
func (r ignoreRef) Evaluate(context.Context) error { return nil }

func (r ignoreRef) ReadFile(_ context.Context, req gwclient.ReadRequest) ([]byte, error) {
	if req.Filename != dockerui.DefaultDockerignoreName || r.data == nil {
		return nil, fs.ErrNotExist
	}
	return r.data, nil
}

func (r ignoreRef) StatFile(_ context.Context, req gwclient.StatRequest) (*fstypes.Stat, error) {
	if req.Path != dockerui.DefaultDockerignoreName || r.data == nil {
		return nil, fs.ErrNotExist
	}
	return &fstypes.Stat{Path: req.Path, Size: int64(len(r.data)), Mode: 0o644}, nil
}

func (r ignoreRef) ReadDir(context.Context, gwclient.ReadDirRequest) ([]*fstypes.Stat, error) {
	return nil, nil
}
