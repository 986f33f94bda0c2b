package main

import (
	"os"
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

// TestREADMESettings: README.md's settings tables (serve/stdio, then
// client) list exactly the settings the code defines, with the same
// environment variables and defaults.
func TestREADMESettings(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	tables := readmeSettingTables(string(b))
	want := []struct {
		name string
		code []settingRow
	}{
		{"serve and stdio", rowsOf(serverSettings("serve"))},
		{"client", rowsOf(clientSettings())},
		{"healthcheck", rowsOf(healthcheckSettings())},
	}
	if len(tables) != len(want) {
		t.Fatalf("README.md has %d tables headed %q, want %d (serve/stdio, client, healthcheck)", len(tables), settingsHeader, len(want))
	}
	for i, w := range want {
		t.Run(w.name, func(t *testing.T) {
			for _, p := range diffSettings(tables[i], w.code) {
				t.Error(p)
			}
		})
	}
	for _, env := range []string{"DARKROOM_UNSAFE_OUTPUT_FETCH", "REPLICATE_API_TOKEN", "FAL_KEY"} {
		if !strings.Contains(string(b), "`"+env+"`") {
			t.Errorf("README.md does not name %s", env)
		}
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
