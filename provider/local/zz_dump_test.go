package local

import (
	"image"
	"image/draw"
	"image/gif"
	"image/png"
	"os"
	"testing"
	"time"
	"fmt"
)

func TestDump(t *testing.T) {
	os.MkdirAll("/tmp/dump", 0o755)
	for i, s := range []spec{
		{model: "local-photo", prompt: "a mountain lake at sunset", ratio: "16:9", seed: 1},
		{model: "local-photo", prompt: "blue night harbour", ratio: "1:1", seed: 2},
		{model: "local-photo", prompt: "forest", ratio: "9:16", seed: 3},
		{model: "local-sketch", prompt: "a cat", ratio: "4:3", seed: 1},
		{model: "local-sketch", prompt: "pink robots", ratio: "21:9", seed: 5},
		{model: "local-sketch", prompt: "hello", ratio: "1:1", seed: 9},
	} {
		f, _ := os.Create(fmt.Sprintf("/tmp/dump/%d.png", i))
		st := time.Now()
		if err := renderImage(f, s); err != nil { t.Fatal(err) }
		fi, _ := f.Stat()
		t.Log(i, time.Since(st), fi.Size())
		f.Close()
	}
	for i, s := range []spec{
		{model: "local-motion", prompt: "a mountain lake at sunset", ratio: "16:9", seed: 1, duration: 6},
		{model: "local-motion", prompt: "night", ratio: "1:1", seed: 1, duration: 2},
	} {
		f, _ := os.Create(fmt.Sprintf("/tmp/dump/v%d.gif", i))
		st := time.Now()
		if err := renderGIF(f, s); err != nil { t.Fatal(err) }
		fi, _ := f.Stat()
		t.Log(i, time.Since(st), fi.Size())
		f.Close()
	}
}

func TestDumpFrames(t *testing.T) {
	f, _ := os.Open("/tmp/dump/v0.gif")
	g, err := gif.DecodeAll(f)
	if err != nil { t.Fatal(err) }
	canvas := image.NewRGBA(image.Rect(0, 0, g.Config.Width, g.Config.Height))
	for i, fr := range g.Image {
		draw.Draw(canvas, fr.Bounds(), fr, fr.Bounds().Min, draw.Over)
		if i == 0 || i == 12 || i == 24 {
			o, _ := os.Create(fmt.Sprintf("/tmp/dump/v0-%d.png", i))
			png.Encode(o, canvas)
			o.Close()
		}
		t.Log(i, fr.Bounds())
	}
}
