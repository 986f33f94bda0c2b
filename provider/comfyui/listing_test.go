package comfyui

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
	"github.com/darkroom-mcp/darkroom/testdata/emulator"
)

// TestComfyListed: a workflow is listed when one backend that answers
// has every node class it uses (GET /object_info), else unlisted with
// the missing nodes named; no backend answering is an error.
func TestComfyListed(t *testing.T) {
	const clip = "comfyui:image-to-video"
	vhs, err := NewWorkflow("vhs-clip", []byte(`{"1":{"class_type":"LoadImage","inputs":{"image":"x.png"}},
		"2":{"class_type":"VHS_VideoCombine","inputs":{"images":["1",0],"frame_rate":8,"filename_prefix":"x"}}}`), mappingFile{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		missing [2][]string // node classes each backend lacks
		down    [2]bool
		model   string
		want    string // "" listed
	}{
		{"installed everywhere", [2][]string{}, [2]bool{}, clip, ""},
		{"on one backend", [2][]string{{"SaveVideo"}}, [2]bool{}, clip, ""},
		{"on none", [2][]string{{"SaveVideo"}, {"SaveVideo"}}, [2]bool{}, clip, "SaveVideo is not installed on any backend"},
		{"custom node on none", [2][]string{{"VHS_VideoCombine"}, {"VHS_VideoCombine"}}, [2]bool{}, "comfyui:vhs-clip", "VHS_VideoCombine is not installed on any backend"},
		{"split over two", [2][]string{{"SaveVideo"}, {"SVD_img2vid_Conditioning"}}, [2]bool{}, clip,
			"no one backend has all of its nodes (SVD_img2vid_Conditioning and SaveVideo each missing on some)"},
		{"the one that has it is down", [2][]string{{}, {"SaveVideo", "CreateVideo"}}, [2]bool{true, false}, clip, "CreateVideo and SaveVideo are not installed on any backend"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, 2, emulator.ComfyOptions{}, Config{NoWebsocket: true})
			ws := append(slicesOf(r.p.Models(), r.p), vhs)
			p, err := New(Config{URLs: []string{r.comfy[0].URL, r.comfy[1].URL}, Workflows: ws, NoWebsocket: true})
			if err != nil {
				t.Fatal(err)
			}
			for i, c := range r.comfy {
				c.Uninstall(tc.missing[i]...)
				c.SetDown(tc.down[i])
			}
			l, err := p.Listed(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(l) != len(ws) {
				t.Fatalf("listing of %d workflows, want %d: %v", len(l), len(ws), l)
			}
			vm := l[tc.model]
			if vm.Listed != (tc.want == "") || vm.Reason != tc.want {
				t.Fatalf("%s: %+v, want %q", tc.model, vm, tc.want)
			}
			if !l["comfyui:text-to-image"].Listed {
				t.Fatalf("text-to-image: %+v", l["comfyui:text-to-image"])
			}
			// What a backend answers is kept only where a workflow uses it.
			used := map[string]bool{}
			for _, w := range ws {
				for _, c := range w.classes() {
					used[c] = true
				}
			}
			for _, b := range p.backends {
				b.mu.Lock()
				for c := range b.classes {
					if !used[c] {
						t.Errorf("%s: class %s kept, which no workflow uses", b.host, c)
					}
				}
				b.mu.Unlock()
			}
		})
	}
	r := newRig(t, 2, emulator.ComfyOptions{}, Config{NoWebsocket: true})
	for _, c := range r.comfy {
		c.SetDown(true)
	}
	if l, err := r.p.Listed(context.Background()); err == nil || !strings.Contains(err.Error(), "no backend answers GET /object_info") {
		t.Fatalf("no backend answering: %v %v", l, err)
	}
}

// slicesOf are the workflows of p's models.
func slicesOf(ms []provider.Model, p *Provider) []*Workflow {
	var out []*Workflow
	for _, m := range ms {
		w, _ := p.Workflow(m.ID)
		out = append(out, w)
	}
	return out
}

// TestComfyChooseByNodes: once Listed has read the backends' node
// classes, a workflow goes only to a backend that has all of them.
func TestComfyChooseByNodes(t *testing.T) {
	for _, read := range []bool{false, true} {
		r := newRig(t, 2, emulator.ComfyOptions{RunTime: time.Hour}, Config{NoWebsocket: true})
		r.comfy[0].Uninstall("SaveVideo")
		if read {
			if _, err := r.p.Listed(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		var refused int
		for i := range 4 {
			_, err := r.p.Submit(context.Background(), provider.Request{IdempotencyKey: fmt.Sprintf("gen-%d", i), Model: r.model("image-to-video"), InputImage: pngInput(64, 64, 1)})
			var perm *provider.PermanentError
			switch {
			case errors.As(err, &perm) && strings.Contains(perm.Message, "missing_node_type"):
				refused++
			case err != nil:
				t.Fatal(err)
			}
		}
		if got := r.comfy[1].Queued(); read && (got != 4 || refused != 0) {
			t.Fatalf("with the nodes read: %d queued where SaveVideo is, %d refused", got, refused)
		} else if !read && refused == 0 {
			t.Fatal("not read: no prompt reached the backend without SaveVideo (the test shows nothing)")
		}
	}
}
