package local

import (
	"context"
	"io"
	"testing"
)

func BenchmarkRenderImage(b *testing.B) {
	for _, model := range []string{"local-sketch", "local-photo"} {
		b.Run(model, func(b *testing.B) {
			s := spec{model: model, prompt: "a lighthouse on a cliff at dusk", ratio: "1:1", seed: 7}
			for b.Loop() {
				if err := renderImage(io.Discard, s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkRenderVideo(b *testing.B) {
	s := spec{model: "local-motion", prompt: "a lighthouse on a cliff at dusk", ratio: "16:9", seed: 7, duration: 6}
	for b.Loop() {
		if err := renderGIF(context.Background(), io.Discard, s); err != nil {
			b.Fatal(err)
		}
	}
}
