package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// settingRow is a setting as README.md's tables show it.
type settingRow struct {
	flag, env, def string // "`--addr`", "`DARKROOM_ADDR`", "`127.0.0.1:8080`"
}

func rowsOf[T any](list []setting[T]) []settingRow {
	var out []settingRow
	for _, s := range list {
		envs := make([]string, len(s.env))
		for i, e := range s.env {
			envs[i] = "`" + e + "`"
		}
		out = append(out, settingRow{"`--" + s.flag + "`", strings.Join(envs, ", "), s.shownDefault()})
	}
	return out
}

const settingsHeader = "| flag | environment | default | meaning |"

// readmeSettingTables returns the rows of every table in readme whose
// header is settingsHeader, in order.
func readmeSettingTables(readme string) [][]settingRow {
	var tables [][]settingRow
	lines := strings.Split(readme, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != settingsHeader {
			continue
		}
		var rows []settingRow
		for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
			cells := strings.Split(strings.Trim(strings.TrimSpace(lines[i]), "|"), "|")
			for len(cells) < 3 {
				cells = append(cells, "")
			}
			rows = append(rows, settingRow{strings.TrimSpace(cells[0]), strings.TrimSpace(cells[1]), strings.TrimSpace(cells[2])})
		}
		tables = append(tables, rows)
	}
	return tables
}

// diffSettings lists how the documented rows differ from the code's.
func diffSettings(doc, code []settingRow) []string {
	var problems []string
	for _, c := range code {
		i := slices.IndexFunc(doc, func(d settingRow) bool { return d.flag == c.flag })
		switch {
		case i < 0:
			problems = append(problems, "missing from README.md: | "+c.flag+" | "+c.env+" | "+c.def+" | ... |")
		case doc[i] != c:
			problems = append(problems, "README.md has | "+doc[i].flag+" | "+doc[i].env+" | "+doc[i].def+" |, the code | "+c.flag+" | "+c.env+" | "+c.def+" |")
		}
	}
	for _, d := range doc {
		if !slices.ContainsFunc(code, func(c settingRow) bool { return c.flag == d.flag }) {
			problems = append(problems, "README.md names "+d.flag+", which the code does not define")
		}
	}
	return problems
}

// configDoc is the full settings reference, generated into its tables by
// TestREADMESettings; README.md shows the few settings people change.
const configDoc = "../../docs/configuration.md"

// settingTables are the settings tables of docs/configuration.md, in order.
func settingTables() []struct {
	name string
	code []settingRow
	help []string
} {
	type table = struct {
		name string
		code []settingRow
		help []string
	}
	helps := func(h ...string) []string { return h }
	var serve, client, health []string
	for _, s := range serverSettings("serve") {
		serve = append(serve, s.help)
	}
	for _, s := range clientSettings() {
		client = append(client, s.help)
	}
	for _, s := range healthcheckSettings() {
		health = append(health, s.help)
	}
	return []table{
		{"serve and stdio", rowsOf(serverSettings("serve")), helps(serve...)},
		{"client", rowsOf(clientSettings()), helps(client...)},
		{"healthcheck", rowsOf(healthcheckSettings()), helps(health...)},
	}
}

// generateSettingTables rewrites every settings table of doc from the
// code's settings: its rows, in the code's order, with the flag,
// environment and default of the code, and the meaning the document
// already gives that flag (the -h help for a flag it does not have yet).
// It returns the new document and an error when doc does not hold the
// tables wanted.
func generateSettingTables(doc string) (string, error) {
	want := settingTables()
	lines := strings.Split(doc, "\n")
	var out []string
	n := 0
	for i := 0; i < len(lines); i++ {
		out = append(out, lines[i])
		if strings.TrimSpace(lines[i]) != settingsHeader {
			continue
		}
		if n >= len(want) {
			return "", fmt.Errorf("%d tables headed %q, want %d (serve/stdio, client, healthcheck)", n+1, settingsHeader, len(want))
		}
		meaning := map[string]string{}
		j := i + 2
		for ; j < len(lines) && strings.HasPrefix(lines[j], "|"); j++ {
			cells := strings.Split(strings.Trim(strings.TrimSpace(lines[j]), "|"), "|")
			if len(cells) >= 4 {
				meaning[strings.TrimSpace(cells[0])] = strings.TrimSpace(strings.Join(cells[3:], "|"))
			}
		}
		if i+1 < len(lines) {
			out = append(out, lines[i+1])
		}
		for k, r := range want[n].code {
			m, ok := meaning[r.flag]
			if !ok {
				m = want[n].help[k]
			}
			row := "| " + r.flag + " | " + r.env + " | " + r.def + " | " + m + " |"
			out = append(out, strings.ReplaceAll(row, "|  |", "| |"))
		}
		i = j - 1
		n++
	}
	if n != len(want) {
		return "", fmt.Errorf("%d tables headed %q, want %d (serve/stdio, client, healthcheck)", n, settingsHeader, len(want))
	}
	return strings.Join(out, "\n"), nil
}

// TestREADMESettings: docs/configuration.md's settings tables (serve and
// stdio, client, healthcheck) are generated from the code's settings,
// and this test fails when they differ from what it would generate
// (DARKROOM_UPDATE_DOCS=1 rewrites them); README.md's table of the
// settings people change names each with the code's environment
// variables and default.
func TestREADMESettings(t *testing.T) {
	b, err := os.ReadFile(configDoc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := generateSettingTables(string(b))
	if err != nil {
		t.Fatalf("%s: %v", configDoc, err)
	}
	if got != string(b) {
		if os.Getenv("DARKROOM_UPDATE_DOCS") == "1" {
			if err := os.WriteFile(configDoc, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			t.Logf("%s: settings tables rewritten from the code", configDoc)
		} else {
			gl, bl := strings.Split(got, "\n"), strings.Split(string(b), "\n")
			for i := range min(len(gl), len(bl)) {
				if gl[i] != bl[i] {
					t.Errorf("%s:%d is\n\t%s\nthe code makes it\n\t%s", configDoc, i+1, bl[i], gl[i])
					break
				}
			}
			t.Errorf("%s's settings tables differ from the code's settings: DARKROOM_UPDATE_DOCS=1 go test -run TestREADMESettings ./cmd/darkroom/ rewrites them", configDoc)
		}
	}
	for _, env := range []string{"DARKROOM_UNSAFE_OUTPUT_FETCH", "REPLICATE_API_TOKEN", "FAL_KEY"} {
		if !strings.Contains(got, "`"+env+"`") {
			t.Errorf("%s does not name %s", configDoc, env)
		}
	}

	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := readmeSettingTables(string(readme))
	if len(tables) != 1 || len(tables[0]) < 8 || len(tables[0]) > 12 {
		t.Fatalf("README.md has %d settings tables, want one of about ten rows (the settings people change)", len(tables))
	}
	code := rowsOf(serverSettings("serve"))
	for _, r := range tables[0] {
		i := slices.IndexFunc(code, func(c settingRow) bool { return c.flag == r.flag })
		switch {
		case i < 0:
			t.Errorf("README.md names %s, which the code does not define", r.flag)
		case code[i] != r:
			t.Errorf("README.md has | %s | %s | %s |, the code | %s | %s | %s |", r.flag, r.env, r.def, code[i].flag, code[i].env, code[i].def)
		}
	}
}

// TestGenerateSettingTables: a table is rebuilt in the code's order with
// the code's columns, keeping the document's meaning of a flag it has and
// taking -h's help for one it has not; a document without the tables is
// refused.
func TestGenerateSettingTables(t *testing.T) {
	want := settingTables()
	var doc strings.Builder
	doc.WriteString("# x\n\n")
	for i, w := range want {
		doc.WriteString(settingsHeader + "\n|---|---|---|---|\n")
		for k, r := range w.code {
			if i == 0 && k == 1 {
				continue // a setting the document lacks
			}
			def := r.def
			if i == 0 && k == 2 {
				def = "`stale`"
			}
			doc.WriteString("| " + r.flag + " | " + r.env + " | " + def + " | kept " + r.flag + " |\n")
		}
		doc.WriteString("| `--gone` | `DARKROOM_GONE` | | a setting the code dropped |\n\ntext\n\n")
	}
	got, err := generateSettingTables(doc.String())
	if err != nil {
		t.Fatal(err)
	}
	tables := readmeSettingTables(got)
	if len(tables) != len(want) {
		t.Fatalf("%d tables, want %d", len(tables), len(want))
	}
	for i, w := range want {
		if !slices.Equal(tables[i], w.code) {
			t.Errorf("table %d: %q, want the code's %q", i, tables[i], w.code)
		}
	}
	s0 := want[0].code
	if !strings.Contains(got, "| "+s0[0].flag+" | "+s0[0].env+" | "+s0[0].def+" | kept "+s0[0].flag+" |") || strings.Contains(got, "|  |") {
		t.Error("the document's meaning was not kept, or an empty cell is not written | |")
	}
	if !strings.Contains(got, "| "+s0[1].flag+" | "+s0[1].env+" | "+s0[1].def+" | "+want[0].help[1]+" |") {
		t.Error("a new setting's meaning is not its help")
	}
	if strings.Contains(got, "`--gone`") || strings.Contains(got, "`stale`") {
		t.Error("a dropped setting or a stale default survived")
	}
	if got2, _ := generateSettingTables(got); got2 != got {
		t.Error("generating twice changes the document")
	}
	if _, err := generateSettingTables("# nothing\n"); err == nil {
		t.Error("a document without the tables was accepted")
	}
}

// TestUserDataDir: stdio's default data directory is each platform's
// folder for an application's data, and the working directory's only
// when none can be named.
func TestUserDataDir(t *testing.T) {
	noHome := func() (string, error) { return "", errors.New("no home") }
	home := func() (string, error) { return "/h", nil }
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	cases := []struct {
		goos string
		env  map[string]string
		home func() (string, error)
		want string
	}{
		{"linux", nil, home, filepath.Join("/h", ".local", "share", "darkroom")},
		{"linux", map[string]string{"XDG_DATA_HOME": "/x"}, home, filepath.Join("/x", "darkroom")},
		{"linux", map[string]string{"XDG_DATA_HOME": "relative"}, home, filepath.Join("/h", ".local", "share", "darkroom")},
		{"freebsd", nil, noHome, "./darkroom-data"},
		{"darwin", nil, home, filepath.Join("/h", "Library", "Application Support", "darkroom")},
		{"darwin", nil, noHome, "./darkroom-data"},
		{"windows", map[string]string{"LOCALAPPDATA": `C:\Users\me\AppData\Local`}, home, filepath.Join(`C:\Users\me\AppData\Local`, "darkroom")},
		{"windows", nil, home, "./darkroom-data"},
	}
	for _, c := range cases {
		if got := userDataDirFor(c.goos, env(c.env), c.home); got != c.want {
			t.Errorf("%s %v: %q, want %q", c.goos, c.env, got, c.want)
		}
	}
	serve, err := parseConfig("serve", nil)
	if err != nil {
		t.Fatal(err)
	}
	stdio, err := parseConfig("stdio", nil)
	if err != nil {
		t.Fatal(err)
	}
	if os.Getenv("DARKROOM_DATA_DIR") == "" && (serve.DataDir != "./darkroom-data" || stdio.DataDir != userDataDir()) {
		t.Errorf("serve's data %q, stdio's %q: want ./darkroom-data and %q", serve.DataDir, stdio.DataDir, userDataDir())
	}
}

// TestDiffSettings: the README check notices each kind of disagreement.
func TestDiffSettings(t *testing.T) {
	code := []settingRow{{"`--addr`", "`DARKROOM_ADDR`", "`127.0.0.1:8080`"}, {"`--data`", "`DARKROOM_DATA_DIR`", "`./d`"}}
	cases := []struct {
		name string
		doc  []settingRow
		want int
	}{
		{"same", code, 0},
		{"same, other order", []settingRow{code[1], code[0]}, 0},
		{"missing row", code[:1], 1},
		{"extra row", append(slices.Clone(code), settingRow{"`--cache`", "`DARKROOM_CACHE`", ""}), 1},
		{"other env", []settingRow{code[0], {"`--data`", "`DARKROOM_DATA`", "`./d`"}}, 1},
		{"other default", []settingRow{code[0], {"`--data`", "`DARKROOM_DATA_DIR`", "`./e`"}}, 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := diffSettings(c.doc, code); len(got) != c.want {
				t.Fatalf("%d problems, want %d: %q", len(got), c.want, got)
			}
		})
	}
}

// TestREADMETableParse: a settings table is read cell by cell, and a
// table with another header is not a settings table.
func TestREADMETableParse(t *testing.T) {
	readme := "x\n\n" + settingsHeader + "\n|---|---|---|---|\n| `--a` | `DARKROOM_A`, `A` | `1` | one |\n| `--b` | `DARKROOM_B` | | two |\n\n" +
		"| tool | what |\n|---|---|\n| `--c` | `DARKROOM_C` |\n"
	got := readmeSettingTables(readme)
	want := [][]settingRow{{{"`--a`", "`DARKROOM_A`, `A`", "`1`"}, {"`--b`", "`DARKROOM_B`", ""}}}
	if len(got) != 1 || !slices.Equal(got[0], want[0]) {
		t.Fatalf("parsed %q, want %q", got, want)
	}
}
