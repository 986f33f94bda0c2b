package soakchart

import (
	"bytes"
	"image/png"
	"math"
	"testing"
)

func TestChart(t *testing.T) {
	c := Chart{
		Title:  "soak",
		Labels: []string{"0:15", "0:30", "0:45", "1:00"},
		Panels: []Panel{
			{Title: "RSS MiB", Series: []Series{{Name: "r0", Values: []float64{40, 42, math.NaN(), 41}}, {Name: "r1", Values: []float64{38, 39, 39, 40}}}},
			{Title: "p99 ms", Series: []Series{{Name: "tasks/get", Values: []float64{3, 12, 8, 4}}}},
		},
		Marks: []Mark{{X: 1.5, Label: "kill -9 r0"}},
	}
	var b bytes.Buffer
	if err := c.Encode(&b); err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(&b)
	if err != nil {
		t.Fatal(err)
	}
	if r := img.Bounds(); r.Dx() != width || r.Dy() != top+2*(panelHeight+gap)+20 {
		t.Fatalf("size %v", r)
	}
	// Each series colour and the fault colour are on the picture.
	seen := map[[3]uint32]bool{}
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			seen[[3]uint32{r >> 8, g >> 8, b >> 8}] = true
		}
	}
	for _, col := range append(Palette[:2:2], fault) {
		if !seen[[3]uint32{uint32(col.R), uint32(col.G), uint32(col.B)}] {
			t.Fatalf("colour %v not drawn", col)
		}
	}
}

func TestNiceCeil(t *testing.T) {
	for _, c := range []struct{ in, want float64 }{{0, 1}, {0.3, 0.5}, {1, 1}, {1.1, 2}, {37, 50}, {120, 200}, {999, 1000}} {
		if got := niceCeil(c.in); math.Abs(got-c.want) > 1e-9 {
			t.Errorf("niceCeil(%v) = %v, want %v", c.in, got, c.want)
		}
	}
}

// TestLabelRows: fault labels that would overlap go a line lower; one
// that clears the line above stays on it.
func TestLabelRows(t *testing.T) {
	ends := make([]int, labelRows)
	for _, c := range []struct{ x, n, want int }{
		{10, 10, 0},  // 10..84
		{50, 10, 1},  // overlaps line 0
		{90, 3, 0},   // clears line 0 (ends at 84)
		{100, 10, 2}, // lines 0 and 1 taken (0 ends 115, 1 ends 124)
		{105, 2, 0},  // all taken: the line ending first
	} {
		if got := labelRow(ends, c.x, c.n); got != c.want {
			t.Fatalf("label at %d (%d chars): line %d, want %d (ends %v)", c.x, c.n, got, c.want, ends)
		}
	}
}
