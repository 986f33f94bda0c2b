package generation

import (
	"fmt"
	"slices"
	"strings"

	"github.com/darkroom-mcp/darkroom/internal/words"
	"github.com/darkroom-mcp/darkroom/provider"
)

// InputFile is one input file of a generation: stored for it, or (From
// set) an earlier output of the same owner's, handed to the provider as it
// is and never the generation's to delete.
type InputFile struct {
	StoredBlob
	Role   string `json:"role,omitempty"`
	Width  int    `json:"width,omitempty"`
	Height int    `json:"height,omitempty"`
	// From is the darkroom:// URI of the output it is.
	From string `json:"from,omitempty"`
}

// owned reports whether the file is the generation's own (deleted with it).
func (f *InputFile) owned() bool { return f != nil && f.From == "" }

// RoleInput is one input a create request names by role: bytes sent with
// it (Image), an earlier output of the caller's (Output, resolved by the
// caller from its URI), or neither: upload_input brings it later.
type RoleInput struct {
	Role   string
	Image  *InputImage
	Output *InputFile
}

// MaxInputs bounds the inputs of one request, whatever a model takes.
const MaxInputs = 8

// MainRole is the role of a model's main input image: the image an image
// model edits or starts from, the first frame of a video model's clip.
func MainRole(kind provider.Kind) string {
	if kind == provider.KindVideo {
		return provider.RoleFirstFrame
	}
	return provider.RoleImage
}

// RolesOf lists the input roles m takes, its main one first.
func RolesOf(m provider.Model) []string {
	var out []string
	if m.NeedsInputImage || m.AcceptsInputImage {
		out = append(out, MainRole(m.Kind))
	}
	for _, r := range provider.Roles {
		if m.Roles[r] > 0 {
			out = append(out, r)
		}
	}
	return out
}

// maxOf is how many inputs of role m takes.
func maxOf(m provider.Model, role string) int {
	if role == MainRole(m.Kind) {
		if m.NeedsInputImage || m.AcceptsInputImage {
			return 1
		}
		return 0
	}
	return m.Roles[role]
}

// checkInputs refuses inputs m cannot take, before anything is stored or
// charged: an unknown role, a role the model does not take or more of it
// than it takes, a main image given twice, an unreadable image, and a mask
// whose size is not its image's (read from both headers).
func (s *Service) checkInputs(req *CreateRequest, m provider.Model) error {
	if len(req.Inputs) > MaxInputs {
		return inputErrorf("inputs has %d entries; the limit is %d", len(req.Inputs), MaxInputs)
	}
	main := MainRole(m.Kind)
	seen := map[string]int{}
	if req.InputImage != nil {
		seen[main] = 1
	}
	for i := range req.Inputs {
		in := &req.Inputs[i]
		field := fmt.Sprintf("inputs[%d]", i)
		if !slices.Contains(provider.Roles, in.Role) {
			return inputErrorf("%s.role %q is not %s", field, in.Role, words.Or(provider.Roles))
		}
		seen[in.Role]++
		switch n := maxOf(m, in.Role); {
		case n == 0:
			return inputErrorf("%s takes no %s input; it takes %s", m.ID, in.Role, rolesInWords(m))
		case seen[in.Role] > n && in.Role == main && req.InputImage != nil:
			return inputErrorf("the %s is given twice: in inputImage and in inputs; give it once", main)
		case seen[in.Role] > n:
			return inputErrorf("%s takes at most %d %s input(s); inputs has %d", m.ID, n, in.Role, seen[in.Role])
		}
		if in.Image != nil {
			if in.Output != nil {
				return inputErrorf("%s: give either uri or image, not both", field)
			}
			w, h, err := s.checkImage(in.Image, field)
			if err != nil {
				return err
			}
			in.Output = &InputFile{Role: in.Role, Width: w, Height: h}
		}
	}
	if seen[provider.RoleMask] > 0 && seen[main] == 0 && !m.NeedsInputImage {
		return inputErrorf("a mask needs the %s it masks: add it to inputs", main)
	}
	return checkMaskSize(req.mainSize(), req.Inputs)
}

// checkMaskSize refuses a mask whose size differs from its image's, when
// both are known (an input still to upload is checked at its upload).
func checkMaskSize(main [2]int, inputs []RoleInput) error {
	for _, in := range inputs {
		if in.Role != provider.RoleMask || in.Output == nil || main[0] == 0 {
			continue
		}
		if in.Output.Width != main[0] || in.Output.Height != main[1] {
			return inputErrorf("the mask is %d×%d pixels but its image is %d×%d; a mask must be the size of the image it masks",
				in.Output.Width, in.Output.Height, main[0], main[1])
		}
	}
	return nil
}

// mainSize is the main input image's size, when it is known.
func (req *CreateRequest) mainSize() [2]int {
	if req.mainDims[0] > 0 {
		return req.mainDims
	}
	for _, in := range req.Inputs {
		if in.Output != nil && (in.Role == provider.RoleImage || in.Role == provider.RoleFirstFrame) {
			return [2]int{in.Output.Width, in.Output.Height}
		}
	}
	return [2]int{}
}

// rolesInWords says which inputs m takes, for an error.
func rolesInWords(m provider.Model) string {
	roles := RolesOf(m)
	if len(roles) == 0 {
		return "no input files"
	}
	return words.And(roles)
}

// awaited lists what a new generation still waits for: its main image
// (a model that needs one and was given none) and the roles named in
// inputs without a file.
func awaited(req *CreateRequest, m provider.Model, p *Params) {
	p.AwaitsImage = m.NeedsInputImage && p.InputImage == nil
	for _, in := range req.Inputs {
		if in.Output != nil {
			continue
		}
		if in.Role == MainRole(m.Kind) {
			p.AwaitsImage = true
		} else {
			p.Awaits = append(p.Awaits, in.Role)
		}
	}
}

// waitingFor is the status message of a generation reserved for inputs.
func waitingFor(p Params) string {
	var roles []string
	if p.AwaitsImage {
		roles = append(roles, "the input image")
	}
	for _, r := range p.Awaits {
		roles = append(roles, "the "+strings.ReplaceAll(r, "_", " "))
	}
	if len(roles) == 1 && p.AwaitsImage {
		return msgAwaitsImage
	}
	return fmt.Sprintf("waiting for %s: call upload_input with this generationId and each role", words.And(roles))
}
