package comfyui

import (
	"cmp"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/darkroom-mcp/darkroom/provider"
)

// A workflow is a ComfyUI graph in API format ({"<node id>": {"class_type",
// "inputs", "_meta"}}, what the "Export (API)" menu saves), served as the
// model comfyui:<file name>. A mapping beside it (<name>.mapping.json)
// says which node input each of darkroom's arguments sets, the kind, the
// price and the expected duration; what it leaves out is detected from
// the common nodes (see detect).

// Node is one node of a graph.
type Node struct {
	ClassType string         `json:"class_type"`
	Inputs    map[string]any `json:"inputs"`
	Meta      map[string]any `json:"_meta,omitempty"`
}

// Workflow is one workflow file, a model.
type Workflow struct {
	Name   string // the file name without .json
	Model  provider.Model
	Map    Mapping
	Frames FrameRule // when Map.Frames is set
	graph  map[string]Node
}

// Mapping is which node input ("node.input") each argument of generate
// sets; empty: none.
type Mapping struct {
	Prompt         string   `json:"prompt,omitempty"`
	NegativePrompt string   `json:"negativePrompt,omitempty"`
	Seed           string   `json:"seed,omitempty"`
	Width          string   `json:"width,omitempty"`
	Height         string   `json:"height,omitempty"`
	Count          string   `json:"count,omitempty"`
	Image          string   `json:"image,omitempty"`      // the main input (a video's first frame)
	Mask           string   `json:"mask,omitempty"`       // white where the image changes
	References     []string `json:"references,omitempty"` // reference images
	LastFrame      string   `json:"lastFrame,omitempty"`
	// Frames is a video's frame count, set from durationSeconds × the
	// frame rate FPS holds (read, never set: input may not change it).
	Frames string `json:"frames,omitempty"`
	FPS    string `json:"fps,omitempty"`
	// Outputs are the node ids whose files are the results (save nodes);
	// a preview node's temporary files never are.
	Outputs []string `json:"outputs,omitempty"`
}

// mappingFile is <name>.mapping.json: the mapping, and what the model is.
type mappingFile struct {
	Mapping
	Title           string   `json:"title"`
	Description     string   `json:"description"`
	Kind            string   `json:"kind"`
	Credits         int64    `json:"credits"`
	ExpectedSeconds float64  `json:"expectedSeconds"`
	MaxCount        int      `json:"maxCount"`
	AspectRatios    []string `json:"aspectRatios"`
	Durations       []int    `json:"durations"`
	// FrameStep, MinFrames and MaxFrames bound the frame count the model
	// takes (frames are FrameStep×n+1 when FrameStep > 1); detected from
	// the frame count's node when left out.
	FrameStep int `json:"frameStep"`
	MinFrames int `json:"minFrames"`
	MaxFrames int `json:"maxFrames"`
}

// Bounds of what a workflow folder may hold.
const (
	maxWorkflowBytes = 1 << 20
	maxWorkflows     = 200
	maxNodes         = 2000
)

var workflowName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// DefaultAspectRatios are offered when a workflow's size is mapped and its
// mapping names none.
var DefaultAspectRatios = []string{"1:1", "16:9", "9:16", "4:3", "3:4", "3:2", "2:3"}

// Video output classes: core SaveVideo and VideoHelperSuite's
// VHS_VideoCombine (its files under "gifs"), and the animated savers.
var videoSavers = map[string]bool{"SaveVideo": true, "VHS_VideoCombine": true, "SaveWEBM": true}
var imageSavers = map[string]bool{"SaveImage": true, "SaveAnimatedWEBP": true, "SaveAnimatedPNG": true}
var samplers = []string{"KSampler", "KSamplerAdvanced", "SamplerCustom", "SamplerCustomAdvanced"}

// LoadWorkflows reads every <name>.json of dir (but *.mapping.json) as a
// workflow. A file that is not a usable workflow is an error naming it:
// the operator put it there to be served.
func LoadWorkflows(dir string) ([]*Workflow, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("comfyui workflows: %w", err)
	}
	var out []*Workflow
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".json") || strings.HasSuffix(n, ".mapping.json") {
			continue
		}
		if len(out) == maxWorkflows {
			return nil, fmt.Errorf("comfyui workflows: more than %d in %s", maxWorkflows, dir)
		}
		w, err := LoadWorkflow(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxWorkflowBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxWorkflowBytes)
	}
	return os.ReadFile(path)
}

// LoadWorkflow reads one workflow file and the mapping beside it.
func LoadWorkflow(path string) (*Workflow, error) {
	name := strings.TrimSuffix(filepath.Base(path), ".json")
	if !workflowName.MatchString(name) {
		return nil, fmt.Errorf("comfyui workflow %s: the file name must be letters, digits, '.', '_' or '-' (it is the model id)", path)
	}
	b, err := readBounded(path)
	if err != nil {
		return nil, fmt.Errorf("comfyui workflow %s: %w", name, err)
	}
	var mf mappingFile
	mb, err := readBounded(strings.TrimSuffix(path, ".json") + ".mapping.json")
	switch {
	case errors.Is(err, os.ErrNotExist):
	case err != nil:
		return nil, fmt.Errorf("comfyui workflow %s: %w", name, err)
	default:
		dec := json.NewDecoder(strings.NewReader(string(mb)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&mf); err != nil {
			return nil, fmt.Errorf("comfyui workflow %s: its mapping: %w", name, err)
		}
	}
	w, err := NewWorkflow(name, b, mf)
	if err != nil {
		return nil, fmt.Errorf("comfyui workflow %s: %w", name, err)
	}
	return w, nil
}

// NewWorkflow builds a workflow from its API-format graph and mapping.
func NewWorkflow(name string, graph []byte, mf mappingFile) (*Workflow, error) {
	var g map[string]Node
	if err := json.Unmarshal(graph, &g); err != nil {
		return nil, fmt.Errorf("not an API-format workflow (export it with \"Export (API)\"): %w", err)
	}
	if len(g) == 0 || len(g) > maxNodes {
		return nil, fmt.Errorf("a workflow has 1 to %d nodes, this one %d", maxNodes, len(g))
	}
	for id, n := range g {
		if n.ClassType == "" {
			return nil, fmt.Errorf("node %s has no class_type: not an API-format workflow (export it with \"Export (API)\")", id)
		}
	}
	w := &Workflow{Name: name, graph: g}
	w.Map = detect(g, mf.Kind)
	if mf.Frames != "" && mf.FPS == "" && w.Map.FPS == "" {
		return nil, errors.New("the mapping's frames needs fps: the node input (\"node.input\") that holds the frame rate")
	}
	if mf.Frames == "" && (w.Map.Frames == "" || w.Map.FPS == "") {
		w.Map.Frames, w.Map.FPS = "", "" // a duration needs both
	}
	mergeMapping(&w.Map, mf.Mapping)
	if err := w.checkMapping(); err != nil {
		return nil, err
	}
	durations := mf.Durations
	if w.Map.Frames != "" {
		rule, err := w.frameRule(mf)
		if err != nil {
			return nil, err
		}
		w.Frames = rule
		if durations, err = rule.durations(mf.Durations); err != nil {
			return nil, err
		}
	}
	kind := provider.Kind(mf.Kind)
	if kind == "" {
		kind = provider.KindImage
		for _, id := range w.Map.Outputs {
			if videoSavers[g[id].ClassType] {
				kind = provider.KindVideo
			}
		}
	}
	if kind != provider.KindImage && kind != provider.KindVideo {
		return nil, fmt.Errorf("kind %q: image or video", mf.Kind)
	}
	expected := time.Duration(mf.ExpectedSeconds * float64(time.Second))
	if expected <= 0 {
		expected = map[provider.Kind]time.Duration{provider.KindImage: 30 * time.Second, provider.KindVideo: 2 * time.Minute}[kind]
	}
	m := provider.Model{
		ID: "comfyui:" + name, Provider: Name, Kind: kind,
		Title:       cmp.Or(mf.Title, name+" (ComfyUI workflow)"),
		Description: cmp.Or(mf.Description, "A ComfyUI workflow run on this server's own ComfyUI."),
		Credits:     max(mf.Credits, 0), PriceUnit: "run", ExpectedDuration: expected, Durations: durations,
		AspectRatios: []string{}, MaxCount: 1,
	}
	if mf.Credits == 0 {
		m.Credits = 1
	}
	if w.Map.Width != "" && w.Map.Height != "" {
		m.AspectRatios = mf.AspectRatios
		if len(m.AspectRatios) == 0 {
			m.AspectRatios = slices.Clone(DefaultAspectRatios)
		}
	}
	if w.Map.Count != "" {
		m.MaxCount = cmp.Or(mf.MaxCount, 4)
		m.PriceUnit = "image"
	}
	if w.Map.Image != "" {
		m.NeedsInputImage = true
	}
	roles := map[string]int{}
	if w.Map.Mask != "" {
		roles[provider.RoleMask] = 1
	}
	if len(w.Map.References) > 0 {
		roles[provider.RoleReference] = len(w.Map.References)
	}
	if w.Map.LastFrame != "" {
		roles[provider.RoleLastFrame] = 1
	}
	if len(roles) > 0 {
		m.Roles = roles
	}
	w.Model = m
	return w, nil
}

func mergeMapping(m *Mapping, over Mapping) {
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&m.Prompt, over.Prompt)
	set(&m.NegativePrompt, over.NegativePrompt)
	set(&m.Seed, over.Seed)
	set(&m.Width, over.Width)
	set(&m.Height, over.Height)
	set(&m.Count, over.Count)
	set(&m.Image, over.Image)
	set(&m.Mask, over.Mask)
	set(&m.LastFrame, over.LastFrame)
	set(&m.Frames, over.Frames)
	set(&m.FPS, over.FPS)
	if over.References != nil {
		m.References = over.References
	}
	if over.Outputs != nil {
		m.Outputs = over.Outputs
	}
}

// ids are a graph's node ids in numeric order.
func ids(g map[string]Node) []string {
	return slices.SortedFunc(maps.Keys(g), func(a, b string) int {
		ai, aerr := strconv.Atoi(a)
		bi, berr := strconv.Atoi(b)
		if aerr == nil && berr == nil && ai != bi {
			return cmp.Compare(ai, bi)
		}
		return strings.Compare(a, b)
	})
}

func literal(n Node, input string) (any, bool) {
	v, ok := n.Inputs[input]
	if !ok {
		return nil, false
	}
	_, link := v.([]any)
	return v, !link
}

func linkFrom(n Node, input string) (string, bool) {
	l, ok := n.Inputs[input].([]any)
	if !ok || len(l) != 2 {
		return "", false
	}
	s, ok := l[0].(string)
	return s, ok
}

// textOf follows a conditioning link back to the text it encodes: the
// first node on the way with a literal text input.
func textOf(g map[string]Node, id string, depth int) string {
	n, ok := g[id]
	if !ok || depth > 6 {
		return ""
	}
	if v, ok := literal(n, "text"); ok {
		if _, s := v.(string); s {
			return id + ".text"
		}
	}
	for _, in := range []string{"conditioning", "positive", "conditioning_to", "conditioning_1"} {
		if from, ok := linkFrom(n, in); ok {
			if t := textOf(g, from, depth+1); t != "" {
				return t
			}
		}
	}
	return ""
}

// detect reads the mapping off common nodes: the sampler's positive and
// negative text encoders and its seed, the empty latent's size and batch
// (or the first node with a literal width and height), LoadImage nodes for
// the inputs (the first the image or first frame, then references, or a
// video's last frame), LoadImageMask for the mask, save nodes for outputs.
func detect(g map[string]Node, kind string) Mapping {
	var m Mapping
	order := ids(g)
	for _, id := range order {
		n := g[id]
		if !slices.Contains(samplers, n.ClassType) {
			continue
		}
		if from, ok := linkFrom(n, "positive"); ok {
			m.Prompt = textOf(g, from, 0)
		}
		if from, ok := linkFrom(n, "negative"); ok {
			m.NegativePrompt = textOf(g, from, 0)
		}
		for _, in := range []string{"seed", "noise_seed"} {
			if _, ok := literal(n, in); ok {
				m.Seed = id + "." + in
			}
		}
		break
	}
	for _, id := range order {
		n := g[id]
		switch {
		case m.Prompt == "" && strings.HasPrefix(n.ClassType, "CLIPTextEncode"):
			if _, ok := literal(n, "text"); ok {
				m.Prompt = id + ".text"
			}
		case m.Seed == "" && n.ClassType == "RandomNoise":
			m.Seed = id + ".noise_seed"
		}
	}
	for _, id := range order {
		n := g[id]
		_, w := literal(n, "width")
		_, h := literal(n, "height")
		if w && h && m.Width == "" {
			m.Width, m.Height = id+".width", id+".height"
			if _, ok := literal(n, "batch_size"); ok {
				m.Count = id + ".batch_size"
			}
		}
		if strings.HasPrefix(n.ClassType, "Empty") && w && h {
			m.Width, m.Height = id+".width", id+".height"
			if _, ok := literal(n, "batch_size"); ok {
				m.Count = id + ".batch_size"
			}
			break
		}
	}
	video := kind == string(provider.KindVideo)
	for _, id := range order {
		if videoSavers[g[id].ClassType] {
			video = kind == "" || video
		}
	}
	var loads []string
	for _, id := range order {
		n := g[id]
		switch {
		case n.ClassType == "LoadImage":
			loads = append(loads, id+".image")
		case n.ClassType == "LoadImageMask" && m.Mask == "":
			m.Mask = id + ".image"
		case imageSavers[n.ClassType] || videoSavers[n.ClassType]:
			m.Outputs = append(m.Outputs, id)
		}
	}
	m.Frames, m.FPS = detectFrames(g, order)
	if len(loads) > 0 {
		m.Image = loads[0]
		if video && len(loads) > 1 {
			m.LastFrame = loads[1]
		} else if len(loads) > 1 {
			m.References = loads[1:]
		}
	}
	return m
}

// owned are the node inputs the mapping sets: input may not set them.
func (w *Workflow) owned() map[string]string {
	o := map[string]string{}
	add := func(ref, arg string) {
		if ref != "" {
			o[ref] = arg
		}
	}
	m := w.Map
	add(m.Prompt, "prompt")
	add(m.NegativePrompt, "negativePrompt")
	add(m.Seed, "seed")
	add(m.Width, "aspectRatio")
	add(m.Height, "aspectRatio")
	add(m.Count, "count")
	add(m.Image, "inputImage")
	add(m.Mask, "inputs (mask)")
	add(m.LastFrame, "inputs (last_frame)")
	for _, r := range m.References {
		add(r, "inputs (reference)")
	}
	add(m.Frames, "durationSeconds")
	add(m.FPS, "durationSeconds (its frame rate)")
	return o
}

func splitRef(ref string) (node, input string, ok bool) {
	node, input, ok = strings.Cut(ref, ".")
	return node, input, ok && node != "" && input != ""
}

// checkMapping: every mapped node input is a literal input of a node the
// graph has, and there is at least one output.
func (w *Workflow) checkMapping() error {
	for ref, arg := range w.owned() {
		node, input, ok := splitRef(ref)
		if !ok {
			return fmt.Errorf("the mapping's %s is %q: it names a node input as \"node.input\"", arg, ref)
		}
		n, ok := w.graph[node]
		if !ok {
			return fmt.Errorf("the mapping's %s names node %s, which the workflow has not", arg, node)
		}
		if _, ok := literal(n, input); !ok {
			return fmt.Errorf("the mapping's %s names %s, which node %s (%s) has not as a value (a linked input cannot be set)", arg, ref, node, n.ClassType)
		}
	}
	if len(w.Map.Outputs) == 0 {
		return errors.New("no output node (SaveImage, SaveVideo, VHS_VideoCombine, ...): name one in the mapping's outputs")
	}
	for _, id := range w.Map.Outputs {
		if _, ok := w.graph[id]; !ok {
			return fmt.Errorf("the mapping's outputs name node %s, which the workflow has not", id)
		}
	}
	return nil
}

// Field is one node input input may set, as describe_model shows it.
type Field struct {
	Name    string `json:"name"` // node.input
	Node    string `json:"node"` // its class and title
	Type    string `json:"type"` // number, string, boolean
	Default any    `json:"default"`
}

// Fields are the node inputs input may set: every literal input the
// mapping does not own, in node order.
func (w *Workflow) Fields() []Field {
	owned := w.owned()
	var out []Field
	for _, id := range ids(w.graph) {
		n := w.graph[id]
		title, _ := n.Meta["title"].(string)
		label := n.ClassType
		if title != "" && title != n.ClassType {
			label += " (" + title + ")"
		}
		for _, in := range slices.Sorted(maps.Keys(n.Inputs)) {
			v, ok := literal(n, in)
			ref := id + "." + in
			if _, own := owned[ref]; !ok || own {
				continue
			}
			t := jsonType(v)
			if t == "" {
				continue
			}
			out = append(out, Field{Name: ref, Node: label, Type: t, Default: v})
		}
	}
	return out
}

func jsonType(v any) string {
	switch v.(type) {
	case float64:
		return "number"
	case string:
		return "string"
	case bool:
		return "boolean"
	}
	return ""
}

// maxInputString bounds a string input may set.
const maxInputString = 10000

// CheckInput validates input against the workflow: each key a node input
// it declares as a value ("node.input"), not one darkroom's own arguments
// set, with a value of the type the workflow gives it.
func (w *Workflow) CheckInput(input map[string]any) error {
	owned := w.owned()
	for _, k := range slices.Sorted(maps.Keys(input)) {
		v := input[k]
		node, in, ok := splitRef(k)
		if !ok {
			return fmt.Errorf("input %q: %s takes node inputs as \"node.input\" (describe_model lists them)", k, w.Model.ID)
		}
		n, ok := w.graph[node]
		if !ok {
			return fmt.Errorf("input %q: workflow %s has no node %s (describe_model lists its inputs)", k, w.Name, node)
		}
		cur, ok := literal(n, in)
		if !ok {
			if _, linked := n.Inputs[in]; linked {
				return fmt.Errorf("input %q: %s's %s is linked to another node, not a value", k, n.ClassType, in)
			}
			return fmt.Errorf("input %q: node %s (%s) has no input %s (describe_model lists its inputs)", k, node, n.ClassType, in)
		}
		if arg, own := owned[k]; own {
			return fmt.Errorf("input %q is set by generate's %s argument", k, arg)
		}
		want, got := jsonType(cur), jsonType(v)
		if want == "" || want != got {
			return fmt.Errorf("input %q: %s's %s is a %s, not a %s", k, n.ClassType, in, cmp.Or(want, "structured value"), cmp.Or(got, "structured value"))
		}
		if s, ok := v.(string); ok && len(s) > maxInputString {
			return fmt.Errorf("input %q: at most %d bytes", k, maxInputString)
		}
		if f, ok := v.(float64); ok && (math.IsNaN(f) || math.IsInf(f, 0)) {
			return fmt.Errorf("input %q: not a finite number", k)
		}
	}
	return nil
}

// seedOf is the seed of a generation that names none: derived from its
// id, so a retry draws the same image (and within a JSON number's exact
// integers).
func seedOf(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64() & (1<<53 - 1))
}

// sizeFor keeps the workflow's area at another aspect ratio, each side a
// multiple of 64.
func sizeFor(w, h float64, ratio string) (float64, float64, bool) {
	a, b, ok := strings.Cut(ratio, ":")
	x, err1 := strconv.ParseFloat(a, 64)
	y, err2 := strconv.ParseFloat(b, 64)
	if !ok || err1 != nil || err2 != nil || x <= 0 || y <= 0 || w <= 0 || h <= 0 {
		return 0, 0, false
	}
	area := w * h
	nw := math.Sqrt(area * x / y)
	nh := area / nw
	round := func(v float64) float64 { return math.Max(64, math.Round(v/64)*64) }
	return round(nw), round(nh), true
}

// build is the graph to queue for req: the workflow with the mapped
// inputs set, the uploaded files named, then input's node inputs.
func (w *Workflow) build(req provider.Request, files map[string]string) (map[string]Node, error) {
	var g map[string]Node
	b, _ := json.Marshal(w.graph)
	if err := json.Unmarshal(b, &g); err != nil {
		return nil, err
	}
	set := func(ref string, v any) {
		if node, in, ok := splitRef(ref); ok {
			if n, ok := g[node]; ok {
				n.Inputs[in] = v
			}
		}
	}
	m := w.Map
	if m.Prompt != "" {
		set(m.Prompt, req.Prompt)
	}
	if m.NegativePrompt != "" && req.NegativePrompt != "" {
		set(m.NegativePrompt, req.NegativePrompt)
	}
	if m.Seed != "" {
		seed := req.Seed
		if seed == 0 {
			seed = seedOf(req.IdempotencyKey)
		}
		set(m.Seed, float64(seed))
	}
	if m.Width != "" && m.Height != "" && req.AspectRatio != "" {
		wn, wi, _ := splitRef(m.Width)
		hn, hi, _ := splitRef(m.Height)
		ww, _ := g[wn].Inputs[wi].(float64)
		hh, _ := g[hn].Inputs[hi].(float64)
		if nw, nh, ok := sizeFor(ww, hh, req.AspectRatio); ok {
			set(m.Width, nw)
			set(m.Height, nh)
		}
	}
	if m.Count != "" {
		set(m.Count, float64(max(req.Count, 1)))
	}
	if m.Frames != "" && req.DurationSeconds > 0 {
		n, err := w.Frames.frames(req.DurationSeconds)
		if err != nil {
			return nil, &provider.PermanentError{Message: fmt.Sprintf("workflow %s: %v", w.Name, err)}
		}
		set(m.Frames, float64(n))
	}
	for ref, name := range files {
		set(ref, name)
	}
	if err := w.CheckInput(req.Input); err != nil {
		return nil, &provider.PermanentError{Message: err.Error()}
	}
	for k, v := range req.Input {
		set(k, v)
	}
	// VideoHelperSuite's combine node files its video as "temp" when
	// save_output is false (videohelpersuite/nodes.py at 001a508, read
	// 2026-12-07: "type": "output" if save_output else "temp"), and a temp
	// file is no result: a save node of the workflow saves.
	for _, id := range m.Outputs {
		if n, ok := g[id]; ok && n.ClassType == "VHS_VideoCombine" {
			n.Inputs["save_output"] = true
		}
	}
	return g, nil
}

//go:embed workflows/*.json
var examples embed.FS

// Examples are the workflows darkroom ships (text-to-image, masked
// inpainting, image-to-video), served when no folder is configured.
func Examples() ([]*Workflow, error) {
	ents, err := fs.ReadDir(examples, "workflows")
	if err != nil {
		return nil, err
	}
	var out []*Workflow
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".mapping.json") {
			continue
		}
		name := strings.TrimSuffix(n, ".json")
		g, _ := examples.ReadFile("workflows/" + n)
		var mf mappingFile
		if b, err := examples.ReadFile("workflows/" + name + ".mapping.json"); err == nil {
			if err := json.Unmarshal(b, &mf); err != nil {
				return nil, fmt.Errorf("comfyui example %s: %w", name, err)
			}
		}
		w, err := NewWorkflow(name, g, mf)
		if err != nil {
			return nil, fmt.Errorf("comfyui example %s: %w", name, err)
		}
		out = append(out, w)
	}
	return out, nil
}
