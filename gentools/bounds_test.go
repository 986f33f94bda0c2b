package gentools_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// baseArgs are arguments each tool accepts, to which one bound is added.
func baseArgs(t *testing.T) map[string]map[string]any {
	var buf bytes.Buffer
	if err := png.Encode(&buf, image.NewGray(image.Rect(0, 0, 4, 4))); err != nil {
		t.Fatal(err)
	}
	img := map[string]any{"data": base64.StdEncoding.EncodeToString(buf.Bytes()), "mimeType": "image/png"}
	id := map[string]any{"generationId": "g"}
	return map[string]map[string]any{
		"generate":          {"modelId": "local-sketch", "prompt": "x"},
		"get_generation":    id,
		"wait_generation":   id,
		"download_output":   id,
		"cancel_generation": id,
		"upload_input":      {"generationId": "g", "image": img},
		"list_generations":  {},
		"list_models":       {},
		"get_credits":       {},
		"describe_model":    {"modelId": "local-sketch"},
		"search_models":     {"query": "sketch"},
	}
}

// TestSchemaBoundsEnforced reads every tool's input schema as a client
// sees it and checks each bound in it against the handler: a string of
// maxLength characters (each two bytes in UTF-8) is not refused for its
// length, one more is refused naming the argument and the limit; an
// integer just outside minimum..maximum is refused. Nothing refused
// creates anything.
func TestSchemaBoundsEnforced(t *testing.T) {
	_, cs := newRig(t, nil).session("alice")
	listed, err := cs.ListTools(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	base := baseArgs(t)
	withArg := func(tool, name string, v any) map[string]any {
		a := maps.Clone(base[tool])
		if a == nil {
			a = map[string]any{} // a tool this test has no arguments for
		}
		a[name] = v
		return a
	}
	checked := 0
	for _, tool := range listed.Tools {
		raw, _ := json.Marshal(tool.InputSchema)
		if strings.Contains(string(raw), "MAX_") || strings.Contains(string(raw), "MIN_") || strings.Contains(string(raw), "DEF_") {
			t.Errorf("%s: schema has an unfilled bound: %s", tool.Name, raw)
		}
		var schema struct {
			Properties map[string]struct {
				Type      string   `json:"type"`
				MaxLength *int     `json:"maxLength"`
				Pattern   *string  `json:"pattern"`
				Minimum   *float64 `json:"minimum"`
				Maximum   *float64 `json:"maximum"`
			} `json:"properties"`
		}
		if err := json.Unmarshal(raw, &schema); err != nil {
			t.Fatalf("%s: %v", tool.Name, err)
		}
		for _, name := range slices.Sorted(maps.Keys(schema.Properties)) {
			p := schema.Properties[name]
			if p.Pattern != nil {
				t.Errorf("%s.%s: a pattern this test does not check", tool.Name, name)
			}
			type probe struct {
				what   string
				v      any
				refuse bool
				want   string
			}
			var probes []probe
			switch {
			case p.Type == "string" && p.MaxLength != nil:
				n := *p.MaxLength
				probes = []probe{
					{fmt.Sprintf("%d characters", n), strings.Repeat("é", n), false, ""},
					{fmt.Sprintf("%d characters", n+1), strings.Repeat("é", n+1), true, fmt.Sprintf("%s is %d characters; the limit is %d", name, n+1, n)},
				}
			case p.Type == "integer" && p.Minimum != nil && p.Maximum != nil:
				lo, hi := int(*p.Minimum), int(*p.Maximum)
				probes = []probe{
					{"minimum", lo, false, ""}, {"maximum", hi, false, ""},
					{"below minimum", lo - 1, true, strconv.Itoa(hi)},
					{"above maximum", hi + 1, true, strconv.Itoa(hi)},
				}
			}
			for _, pr := range probes {
				checked++
				t.Run(tool.Name+"/"+name+"/"+pr.what, func(t *testing.T) {
					before := count(t, cs)
					res := call(t, cs, tool.Name, withArg(tool.Name, name, pr.v))
					msg := text(res)
					bound := strings.Contains(msg, "limit is") || strings.Contains(msg, "must be between")
					if !pr.refuse {
						if res.IsError && bound {
							t.Fatalf("a value at the bound was refused: %s", msg)
						}
						return
					}
					if !res.IsError || !strings.Contains(msg, name) || !strings.Contains(msg, pr.want) {
						t.Fatalf("isError=%v %q; want a tool error naming %s and %q", res.IsError, msg, name, pr.want)
					}
					if n := count(t, cs); n != before {
						t.Fatalf("a refused call created %d generation(s)", n-before)
					}
				})
			}
		}
	}
	if checked == 0 {
		t.Error("no bound was probed: the schemas lost theirs")
	}
}

// TestInputImageRefusedUpFront: an input image that cannot be used is an
// isError result, read from its header before anything is stored or
// charged, through generate and upload_input alike.
func TestInputImageRefusedUpFront(t *testing.T) {
	budget := int64(100)
	r := newRig(t, &budget)
	_, cs := r.session("alice")
	header := func(w, h uint32, depth, ct byte) string {
		b := []byte("\x89PNG\r\n\x1a\n")
		chunk := func(typ string, data []byte) {
			b = binary.BigEndian.AppendUint32(b, uint32(len(data)))
			start := len(b)
			b = append(append(b, typ...), data...)
			b = binary.BigEndian.AppendUint32(b, crc32.ChecksumIEEE(b[start:]))
		}
		chunk("IHDR", append(binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, w), h), depth, ct, 0, 0, 0))
		chunk("IEND", nil)
		return base64.StdEncoding.EncodeToString(b)
	}
	cases := []struct {
		name, data, want string
	}{
		{"16-bit bomb", header(20000, 20000, 16, 6), " is 20000×20000 pixels; the limit is 8192 pixels a side and 40 million"},
		{"too many pixels", header(8000, 5001, 8, 2), "40 million pixels: scale it down"},
		{"broken header", base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\nIHDR")), "not a valid image/png"},
		{"not an image", base64.StdEncoding.EncodeToString([]byte("GIF89a")), "not a PNG, JPEG or WebP"},
	}
	reserved := generate(t, cs, map[string]any{"modelId": "local-animate", "prompt": "later"})
	spent := getCredits(t, cs).Spent
	files := countFiles(t, r.parts.Dir)
	for _, c := range cases {
		img := map[string]any{"data": c.data}
		for tool, args := range map[string]map[string]any{
			"generate":        {"modelId": "local-animate", "prompt": "x", "inputImage": img},
			"upload_input":    {"generationId": reserved.GenerationID, "image": img},
			"generate inputs": {"modelId": "local-animate", "prompt": "x", "inputs": []any{map[string]any{"role": "first_frame", "image": img}}},
		} {
			tool, _, _ := strings.Cut(tool, " ")
			t.Run(tool+"/"+c.name, func(t *testing.T) {
				res := call(t, cs, tool, args)
				if !res.IsError || !strings.Contains(text(res), c.want) {
					t.Fatalf("isError=%v %q; want a tool error with %q", res.IsError, text(res), c.want)
				}
			})
		}
	}
	if n := count(t, cs); n != 1 {
		t.Errorf("%d generations; refused images created some", n-1)
	}
	if got := getCredits(t, cs).Spent; got != spent {
		t.Errorf("refused images were charged: spent %d, was %d", got, spent)
	}
	if n := countFiles(t, r.parts.Dir); n != files {
		t.Errorf("refused images stored %d file(s)", n-files)
	}
	var g view
	decode(t, "get_generation", call(t, cs, "get_generation", map[string]any{"generationId": reserved.GenerationID}), &g)
	if g.Status != "reserved" {
		t.Errorf("the reserved generation is %s after refused uploads", g.Status)
	}
}

// countFiles counts the files under dir other than the database's.
func countFiles(t *testing.T, dir string) int {
	t.Helper()
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.Contains(d.Name(), "darkroom.db") {
			n++
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
