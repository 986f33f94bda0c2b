package gentools

import "testing"

func TestParseOutputURI(t *testing.T) {
	const id = "01a2316603d2ac8483a3913bb7937bcb85447d2f6814"
	for _, c := range []struct {
		uri   string
		ok    bool
		index int
	}{
		{OutputURI(id, 0), true, 0},
		{OutputURI(id, 12), true, 12},
		{"darkroom://generations/" + id + "/outputs/01", false, 0},
		{"darkroom://generations/" + id + "/outputs/-1", false, 0},
		{"darkroom://generations/" + id + "/outputs/", false, 0},
		{"darkroom://generations/" + id + "/outputs/0/", false, 0},
		{"darkroom://generations/" + id + "/outputs/0?x=1", false, 0},
		{"darkroom://generations/" + id + "/outputs/99999", false, 0},
		{"darkroom://generations/" + id + "/inputs/0", false, 0},
		{"darkroom://generations//outputs/0", false, 0},
		{"darkroom://generations/../outputs/0", false, 0},
		{"darkroom://generations/a%2Fb/outputs/0", false, 0},
		{"DARKROOM://generations/" + id + "/outputs/0", false, 0},
		{"https://example.com/x", false, 0},
		{"", false, 0},
	} {
		gotID, i, ok := parseOutputURI(c.uri)
		if ok != c.ok || (ok && (gotID != id || i != c.index)) {
			t.Errorf("parseOutputURI(%q) = %q, %d, %v; want ok=%v index %d", c.uri, gotID, i, ok, c.ok, c.index)
		}
	}
}

func FuzzParseOutputURI(f *testing.F) {
	f.Add(OutputURI("abc", 3))
	f.Add("darkroom://generations/x/outputs/0/")
	f.Fuzz(func(t *testing.T, uri string) {
		id, i, ok := parseOutputURI(uri)
		if ok && OutputURI(id, i) != uri {
			t.Fatalf("%q parses to %q/%d, which names %q", uri, id, i, OutputURI(id, i))
		}
	})
}
