package emulator

import (
	"encoding/base64"
	"io"
	"net/http"
	"regexp"
	"strconv"
)

// Hostile replies, steered by prompt tokens as the other behaviours are,
// so a test plays a vendor that returns more than it was asked for:
//
//   - [many:N]: the reply carries N images (OpenAI, Imagen, Gemini), or
//     the job N output files (Replicate, fal), whatever count was asked;
//   - [endless]: the reply's one image is a PNG header followed by base64
//     that never ends (until the client hangs up); a file download the
//     same, unbase64'd;
//   - [zeros:N]: the one image is N bytes of zeros (an "image" in name
//     only), streamed as it is read;
//   - [large:N]: the one image is N bytes, a real PNG padded with zeros
//     (an image every check accepts, only large), streamed likewise.
//
// Nothing is held whole: a reply of gigabytes costs the emulator a
// buffer.

var hostileToken = regexp.MustCompile(`\[(many|zeros|large):(\d+)\]|\[endless\]`)

type hostility struct {
	many    int
	endless bool
	zeros   int64
	large   int64
}

func hostileOf(prompt string) (h hostility, ok bool) {
	for _, m := range hostileToken.FindAllStringSubmatch(prompt, -1) {
		n, _ := strconv.ParseInt(m[2], 10, 64)
		switch m[1] {
		case "many":
			h.many = int(n)
		case "zeros":
			h.zeros = n
		case "large":
			h.large = n
		default:
			h.endless = true
		}
		ok = true
	}
	return h, ok
}

func jobPrompt(j *job) string {
	p, _ := j.input["prompt"].(string)
	return p
}

// replyShape is how a vendor's synchronous reply wraps its images.
type replyShape struct{ head, open, close, tail string }

var (
	openaiShape = replyShape{`{"created":1,"data":[`, `{"b64_json":"`, `"}`, `],"output_format":"png"}`}
	geminiShape = replyShape{`{"candidates":[{"content":{"role":"model","parts":[{"text":"Here you are."},`,
		`{"inlineData":{"mimeType":"image/png","data":"`, `"}}`, `]},"finishReason":"STOP","index":0}]}`}
)

// zeroChunk is 48 KiB of zeros, and their base64.
var zeroChunk = make([]byte, 48<<10)
var zeroChunk64 = []byte(base64.StdEncoding.EncodeToString(zeroChunk))

// hostileReply writes a synchronous reply of shape s as h says; it
// returns once written or once the client hangs up.
func hostileReply(w http.ResponseWriter, s replyShape, h hostility) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	png64 := base64.StdEncoding.EncodeToString(pngBytes)
	io.WriteString(w, s.head)
	switch {
	case h.endless:
		// The PNG's last base64 quantum (its padding) is left out, so
		// the zeros' base64 goes on from a whole quantum.
		io.WriteString(w, s.open+png64[:len(png64)-4])
		for {
			if _, err := w.Write(zeroChunk64); err != nil {
				return
			}
		}
	case h.zeros > 0 || h.large > 0:
		io.WriteString(w, s.open)
		enc := base64.NewEncoder(base64.StdEncoding, w)
		if writePadded(enc, h) != nil {
			return
		}
		enc.Close()
		io.WriteString(w, s.close)
	default:
		item := []byte(s.open + png64 + s.close)
		for i := range h.many {
			if i > 0 {
				io.WriteString(w, ",")
			}
			if _, err := w.Write(item); err != nil {
				return
			}
		}
	}
	io.WriteString(w, s.tail)
}

func writeZeros(w io.Writer, n int64) error {
	for ; n > 0; n -= int64(len(zeroChunk)) {
		if _, err := w.Write(zeroChunk[:min(n, int64(len(zeroChunk)))]); err != nil {
			return err
		}
	}
	return nil
}

// writePadded writes h's zeros, or its large image: the PNG, then zeros
// up to h.large bytes in all.
func writePadded(w io.Writer, h hostility) error {
	if h.large <= 0 {
		return writeZeros(w, h.zeros)
	}
	if _, err := w.Write(pngBytes); err != nil {
		return err
	}
	return writeZeros(w, h.large-int64(len(pngBytes)))
}

// hostileFile serves an output file of a job whose prompt asks for one:
// zeros, or a PNG header then bytes without end. ok is false otherwise.
func hostileFile(w http.ResponseWriter, j *job) (ok bool) {
	h, _ := hostileOf(jobPrompt(j))
	switch {
	case h.endless:
		w.Header().Set("Content-Type", "image/png")
		w.Write(pngBytes)
		for {
			if _, err := w.Write(zeroChunk); err != nil {
				return true
			}
		}
	case h.zeros > 0 || h.large > 0:
		w.Header().Set("Content-Type", "image/png")
		size := h.zeros
		if h.large > 0 {
			size = max(h.large, int64(len(pngBytes)))
		}
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		writePadded(w, h)
		return true
	}
	return false
}

// hostileCount is the output count a job's prompt imposes (0: none).
func hostileCount(j *job) int {
	h, _ := hostileOf(jobPrompt(j))
	return h.many
}
