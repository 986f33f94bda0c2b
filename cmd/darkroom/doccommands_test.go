package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// docFiles are the guides whose commands TestDocCommands runs or checks.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"../../README.md", "../../CONTRIBUTING.md"}
	more, err := filepath.Glob("../../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append(files, more...)
}

// docBlock is one fenced block of a guide.
type docBlock struct {
	where, lang, text string
	before            string // the text before it, up to 300 bytes: what it is for
}

var fenceRE = regexp.MustCompile("(?ms)^```([a-z]*)\\n(.*?)^```")

func docBlocks(t *testing.T) []docBlock {
	t.Helper()
	var out []docBlock
	for _, f := range docFiles(t) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range fenceRE.FindAllStringSubmatchIndex(string(b), -1) {
			line := strings.Count(string(b[:m[0]]), "\n") + 1
			out = append(out, docBlock{fmt.Sprintf("%s:%d", strings.TrimPrefix(f, "../../"), line), string(b[m[2]:m[3]]), string(b[m[4]:m[5]]), string(b[max(0, m[0]-300):m[0]])})
		}
	}
	return out
}

// shellCommands are a shell block's commands: continuation lines joined,
// comments dropped, `a && b` split; in a block that shows a session
// (no language), the lines after a `$ ` prompt.
func shellCommands(b docBlock) []string {
	text := strings.ReplaceAll(b.text, "\\\n", " ")
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if b.lang == "" {
			if !strings.HasPrefix(l, "$ ") {
				continue
			}
			l = l[2:]
		}
		if i := strings.Index(l, " #"); i >= 0 {
			l = l[:i]
		}
		l = strings.TrimSpace(l)
		if l == "" || strings.HasPrefix(l, "#") {
			continue
		}
		for _, c := range strings.Split(l, " && ") {
			out = append(out, strings.TrimSpace(c))
		}
	}
	return out
}

// shellWords splits a command as sh does for the forms the guides use:
// single and double quotes, and $(…) kept whole.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	in, depth, any := byte(0), 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case in != 0:
			if c == in {
				in = 0
			} else {
				cur.WriteByte(c)
			}
		case depth > 0:
			cur.WriteByte(c)
			if c == '(' {
				depth++
			} else if c == ')' {
				depth--
			}
		case c == '\'' || c == '"':
			in, any = c, true
		case c == '$' && i+1 < len(s) && s[i+1] == '(':
			cur.WriteString("$(")
			depth, any = 1, true
			i++
		case c == ' ' || c == '\t':
			if any {
				out = append(out, cur.String())
				cur.Reset()
				any = false
			}
		default:
			cur.WriteByte(c)
			any = true
		}
	}
	if any {
		out = append(out, cur.String())
	}
	return out
}

// TestShellWords: quotes and $(…) as sh reads them.
func TestShellWords(t *testing.T) {
	cases := map[string][]string{
		`darkroom client call generate '{"a":"b c"}'`:           {"darkroom", "client", "call", "generate", `{"a":"b c"}`},
		`"$(go env GOPATH)/bin/darkroom" version`:               {"$(go env GOPATH)/bin/darkroom", "version"},
		`-e K=me=$(openssl rand -hex 24) img`:                   {"-e", "K=me=$(openssl rand -hex 24)", "img"},
		`claude mcp add --header "Authorization: Bearer <key>"`: {"claude", "mcp", "add", "--header", "Authorization: Bearer <key>"},
	}
	for in, want := range cases {
		if got := shellWords(in); !slices.Equal(got, want) {
			t.Errorf("shellWords(%q) = %q, want %q", in, got, want)
		}
	}
	b := docBlock{lang: "sh", text: "a \\\n  b # c\n# d\n\nx && y\n"}
	if got := shellCommands(b); !slices.Equal(got, []string{"a    b", "x", "y"}) {
		t.Errorf("shellCommands = %q", got)
	}
	if got := shellCommands(docBlock{text: "$ darkroom models check\noutput\n"}); !slices.Equal(got, []string{"darkroom models check"}) {
		t.Errorf("a session's commands = %q", got)
	}
}

// docRun is what TestDocCommands does with the commands it meets: each
// darkroom command is run (a server once, shared by what needs one).
type docRun struct {
	t       *testing.T
	serve   *proc
	ran     map[string]bool
	module  string
	targets []string
	image   string // the tag make image builds
}

// TestDocCommands: every command in README.md, CONTRIBUTING.md and docs/
// is one a test runs or checks, so the guides cannot drift: darkroom's
// own commands run here against the built binary (version, serve, stdio
// as an assistant starts it, client call, models check, and those the
// Claude Code and Inspector lines start); make targets exist; go install
// and git clone name this module; the container commands run what make
// image builds (deploy/imagetest runs them on an engine); the JSON
// configs parse, with VS Code's servers key, and start a command this
// test ran. A command of any other kind fails it.
func TestDocCommands(t *testing.T) {
	clearSettingsEnv(t)
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	gomod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	r := &docRun{t: t, ran: map[string]bool{}}
	r.module = strings.TrimSpace(strings.TrimPrefix(strings.SplitN(string(gomod), "\n", 2)[0], "module "))
	for _, m := range regexp.MustCompile(`(?m)^([a-z-]+):`).FindAllStringSubmatch(string(mk), -1) {
		r.targets = append(r.targets, m[1])
	}
	if m := regexp.MustCompile(`(?m)^image:.*\n\tDARKROOM_IMAGE=\$\$\{DARKROOM_IMAGE:-([^}]+)\}`).FindStringSubmatch(string(mk)); m != nil {
		r.image = m[1]
	} else {
		t.Fatal("the Makefile's image target names no default tag")
	}
	n := 0
	for _, b := range docBlocks(t) {
		switch b.lang {
		case "json":
			r.config(b)
		case "sh", "bash", "":
			images := []string{r.image}
			names := []string{}
			for _, c := range shellCommands(b) {
				n++
				r.command(b.where, c, &images, &names)
			}
		}
	}
	t.Logf("%d commands in the guides, darkroom run as %d distinct commands", n, len(r.ran))
	for _, must := range []string{"version", "serve", "stdio", "client call", "models check"} {
		if !r.ran[must] {
			t.Errorf("no guide runs darkroom %s, which README's Install and first generation need", must)
		}
	}
}

// darkroomArgs is argv when it starts darkroom (its binary by any path,
// or go run of its package), else nil.
func darkroomArgs(argv []string) []string {
	switch {
	case len(argv) == 0:
		return nil
	case argv[0] == "darkroom" || strings.HasSuffix(argv[0], "/bin/darkroom") || strings.HasSuffix(argv[0], "/darkroom"):
		return argv[1:]
	case len(argv) >= 3 && argv[0] == "go" && argv[1] == "run" && argv[2] == "./cmd/darkroom":
		return argv[3:]
	}
	return nil
}

func (r *docRun) command(where, c string, images, names *[]string) {
	t := r.t
	argv := shellWords(c)
	// VAR=value prefixes: each must be a setting's variable.
	for len(argv) > 0 && regexp.MustCompile(`^[A-Z_][A-Z0-9_]*=`).MatchString(argv[0]) {
		name, _, _ := strings.Cut(argv[0], "=")
		if !isSettingEnv(name) {
			t.Errorf("%s: %s sets %s, which no darkroom setting reads", where, c, name)
		}
		argv = argv[1:]
	}
	if len(argv) == 0 {
		t.Errorf("%s: %q is no command", where, c)
		return
	}
	if args := darkroomArgs(argv); args != nil || argv[0] == "darkroom" {
		r.darkroom(where, args)
		return
	}
	switch argv[0] {
	case "claude":
		// Claude Code's claude mcp add: after --, the command it starts;
		// with --transport http, the URL darkroom serve listens at.
		if i := slices.Index(argv, "--"); i >= 0 {
			if args := darkroomArgs(argv[i+1:]); args != nil {
				r.darkroom(where, args)
				return
			}
		}
		if slices.Contains(argv, "--transport") && slices.Contains(argv, "http") {
			if !slices.Contains(argv, "http://127.0.0.1:8080/mcp") {
				t.Errorf("%s: %s does not name darkroom serve's default URL", where, c)
			}
			return
		}
		t.Errorf("%s: %s starts nothing this test runs", where, c)
	case "npx":
		// The Inspector CLI, which TestRealClients drives the same way.
		pkg, _ := os.ReadFile("../../testdata/clients/package.json")
		if len(argv) < 3 || !strings.Contains(string(pkg), `"`+argv[1]+`"`) {
			t.Errorf("%s: %s runs a package testdata/clients does not pin", where, c)
		}
		if i := slices.Index(argv, "--cli"); i >= 0 && i+1 < len(argv) {
			if args := darkroomArgs(argv[i+1:]); args != nil {
				r.darkroom(where, args[:1])
			} else if argv[i+1] != "http://127.0.0.1:8080/mcp" {
				t.Errorf("%s: %s does not name darkroom serve's default URL", where, c)
			}
		}
	case "go":
		if len(argv) == 3 && argv[1] == "install" && argv[2] == r.module+"/cmd/darkroom@latest" {
			return // this module's command: the package darkroom is built from
		}
		t.Errorf("%s: %s", where, c)
	case "git":
		if !(len(argv) >= 3 && argv[1] == "clone" && argv[2] == "https://"+r.module) {
			t.Errorf("%s: %s does not clone %s", where, c, r.module)
		}
	case "cd":
		if st, err := os.Stat(filepath.Join("../..", argv[1])); (err != nil || !st.IsDir()) && argv[1] != "darkroom" {
			t.Errorf("%s: cd %s: no such folder in the repository", where, argv[1])
		}
	case "make":
		for _, tg := range argv[1:] {
			if !slices.Contains(r.targets, tg) {
				t.Errorf("%s: make %s: no such target", where, tg)
			}
		}
	case "export":
		for _, a := range argv[1:] {
			name, _, _ := strings.Cut(a, "=")
			if !isSettingEnv(name) && !slices.Contains([]string{"DARKROOM_S3_SECRET", "CONTAINERS_CONF"}, name) {
				t.Errorf("%s: export %s: read by nothing", where, name)
			}
		}
	case "scripts/fleet.sh":
		r.checkScriptArg(where, argv)
	case "docker", "podman", "podman-compose":
		r.container(where, c, argv, images, names)
	default:
		t.Errorf("%s: %q is a command no test runs or checks", where, c)
	}
}

func (r *docRun) checkScriptArg(where string, argv []string) {
	b, err := os.ReadFile(filepath.Join("../..", argv[0]))
	if err != nil || len(argv) < 2 || !strings.Contains(string(b), "  "+argv[1]+")") {
		r.t.Errorf("%s: %s: no such script or command", where, strings.Join(argv, " "))
	}
}

// container checks an engine command: an image run is the one make image
// (or the block's build) tags, a container named is one the block runs,
// compose runs deploy/compose.yaml (make fleet-test brings it up).
func (r *docRun) container(where, c string, argv []string, images, names *[]string) {
	t := r.t
	if argv[0] == "podman-compose" || (len(argv) > 1 && argv[1] == "compose") {
		if _, err := os.Stat("../../deploy/compose.yaml"); err != nil {
			t.Errorf("%s: %s: %v", where, c, err)
		}
		return
	}
	if len(argv) < 2 {
		t.Errorf("%s: %s", where, c)
		return
	}
	switch argv[1] {
	case "build":
		if i := slices.Index(argv, "-t"); i >= 0 && i+1 < len(argv) {
			*images = append(*images, argv[i+1])
		}
	case "run":
		img := ""
		for i := 2; i < len(argv); i++ {
			a := argv[i]
			if slices.Contains([]string{"--name", "-p", "-v", "-e", "--env", "--publish", "--volume"}, a) {
				if a == "--name" && i+1 < len(argv) {
					*names = append(*names, argv[i+1])
				}
				i++
				continue
			}
			if strings.HasPrefix(a, "-") {
				continue
			}
			img = a
			break
		}
		canon := func(s string) string {
			if !strings.Contains(s, ":") {
				s += ":latest"
			}
			return strings.TrimPrefix(s, "localhost/")
		}
		if !slices.ContainsFunc(*images, func(i string) bool { return canon(i) == canon(img) }) {
			t.Errorf("%s: %s runs %q, which neither make image (%s) nor this block builds: on Podman a short name that is not local fails to resolve", where, c, img, r.image)
		}
		for _, a := range argv {
			if name, _, ok := strings.Cut(strings.TrimPrefix(a, "-e "), "="); ok && strings.HasPrefix(name, "DARKROOM_") && !isSettingEnv(name) {
				t.Errorf("%s: %s sets %s, which no setting reads", where, c, name)
			}
		}
	case "logs", "stop", "inspect", "rm":
		last := argv[len(argv)-1]
		if !strings.HasPrefix(last, "$(") && !slices.Contains(*names, last) {
			t.Errorf("%s: %s names a container the block does not run", where, c)
		}
	case "volume", "network", "ps":
	default:
		t.Errorf("%s: %q is an engine command no test runs or checks", where, c)
	}
}

// isSettingEnv: name is an environment variable of a darkroom setting.
func isSettingEnv(name string) bool {
	for _, s := range serverSettings("serve") {
		if slices.Contains(s.env, name) {
			return true
		}
	}
	return false
}

// darkroom runs `darkroom args` once per distinct command: version and
// models check to their end (no keys: offline), serve until it answers
// (then kept for client call), stdio as a host starts it (tools listed).
func (r *docRun) darkroom(where string, args []string) {
	t := r.t
	if len(args) == 0 {
		t.Errorf("%s: darkroom without a command", where)
		return
	}
	key := args[0]
	if len(args) > 1 && (args[0] == "client" || args[0] == "models") {
		key = args[0] + " " + args[1]
	}
	if r.ran[key] && key != "client call" {
		return
	}
	r.ran[key] = true
	home := t.TempDir()
	env := append(os.Environ(), "HOME="+home, "XDG_DATA_HOME=", "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_MODELS_REFRESH=0")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	switch key {
	case "version", "models check":
		cmd := exec.CommandContext(ctx, binary, args...)
		cmd.Dir, cmd.Env = home, env
		out, err := cmd.CombinedOutput()
		if err != nil || (key == "version" && !strings.HasPrefix(string(out), "darkroom ")) {
			t.Errorf("%s: darkroom %s: %v\n%s", where, strings.Join(args, " "), err, out)
		}
	case "serve":
		if r.serve == nil {
			r.serve = startProcess(t, t.TempDir(), "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_MODELS_REFRESH=0")
		}
	case "stdio":
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Env = home, append(env, "DARKROOM_ADDR=127.0.0.1:0")
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "docs", Version: "1"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
		if err != nil {
			t.Errorf("%s: darkroom %s as a host starts it: %v", where, strings.Join(args, " "), err)
			return
		}
		defer cs.Close()
		if tools, err := cs.ListTools(ctx, nil); err != nil || len(tools.Tools) == 0 {
			t.Errorf("%s: darkroom %s: tools/list %v", where, strings.Join(args, " "), err)
		}
		if _, err := os.Stat(filepath.Join(home, ".local", "share", "darkroom", "darkroom.db")); err != nil && len(args) == 1 {
			t.Errorf("%s: darkroom stdio keeps no database in the user data folder: %v", where, err)
		}
	case "client call":
		if r.serve == nil {
			r.ran["serve"] = true
			r.serve = startProcess(t, t.TempDir(), "DARKROOM_LOCAL_LATENCY=0", "DARKROOM_MODELS_REFRESH=0")
		}
		cmd := exec.CommandContext(ctx, binary, append([]string{"client", "--endpoint", r.serve.url + "/mcp", "--state", filepath.Join(home, "client.db")}, args[1:]...)...)
		cmd.Env = env
		out, err := cmd.Output()
		var res struct {
			StructuredContent struct{ Status string } `json:"structuredContent"`
		}
		if err != nil || json.Unmarshal(out, &res) != nil || res.StructuredContent.Status != "completed" {
			t.Errorf("%s: darkroom %s: %v\n%s", where, strings.Join(args, " "), err, out)
		}
	default:
		t.Errorf("%s: darkroom %s: a command this test does not run", where, strings.Join(args, " "))
	}
}

// config checks an assistant's JSON config: it parses; VS Code's (the
// one with a type stdio entry, or named so) uses servers, the others
// mcpServers; a stdio entry starts darkroom with arguments this test
// runs, an http one names serve's default URL.
func (r *docRun) config(b docBlock) {
	t := r.t
	var top map[string]json.RawMessage
	if err := json.Unmarshal([]byte(b.text), &top); err != nil {
		var v any
		if json.Unmarshal([]byte(b.text), &v) != nil {
			t.Errorf("%s: the JSON does not parse: %v", b.where, err)
		}
		return
	}
	if _, ok := top["mcpServers"]; !ok {
		if _, ok := top["servers"]; !ok {
			return // not an assistant's config: it parses
		}
	}
	var doc map[string]map[string]struct {
		Type    string   `json:"type"`
		Command string   `json:"command"`
		Args    []string `json:"args"`
		URL     string   `json:"url"`
	}
	if err := json.Unmarshal([]byte(b.text), &doc); err != nil {
		t.Errorf("%s: the JSON does not parse: %v", b.where, err)
		return
	}
	para := strings.TrimSpace(b.before)
	vscode := strings.Contains(para[max(0, strings.LastIndex(para, "\n\n")):], ".vscode/mcp.json") // VS Code's own file
	for key, servers := range doc {
		if key != "mcpServers" && key != "servers" {
			t.Errorf("%s: %q is no host's key for servers", b.where, key)
		}
		if vscode != (key == "servers") {
			t.Errorf("%s: %q: VS Code's key is servers, every other host's mcpServers", b.where, key)
		}
		for _, s := range servers {
			if key == "servers" && s.Type == "" {
				t.Errorf("%s: VS Code's servers entries name their type", b.where)
			}
			switch {
			case s.Command != "":
				if args := darkroomArgs(append([]string{s.Command}, s.Args...)); args == nil || args[0] != "stdio" {
					t.Errorf("%s: the config starts %s %v, not darkroom stdio", b.where, s.Command, s.Args)
				} else if _, err := parseConfig("stdio", args[1:]); err != nil {
					t.Errorf("%s: darkroom %v: %v", b.where, args, err)
				} else {
					r.darkroom(b.where, args[:1])
				}
			case s.URL != "http://127.0.0.1:8080/mcp" || s.Type != "http":
				t.Errorf("%s: an http entry %+v, not darkroom serve's default URL", b.where, s)
			}
		}
	}
}
