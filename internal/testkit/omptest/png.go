package omptest

import (
	"bytes"
	"image"
	"image/color"
	"image/png"
	"os"
)

// WritePNG writes a small valid PNG at path: 200x200 pixels of 8x8 blocks
// in colors drawn from seed, so different seeds give different files and
// blobs. omp's read tool passes such an image through unchanged (at least
// 200 px a side and under 125 KB, image-resize.ts) and, its base64 being
// over 1 KiB, stores it as a blob: <agent dir>/blobs/<sha256> plus the
// hardlink <sha256>.png. A smaller image would be re-encoded (often to
// WebP) or kept inline in the session file.
func WritePNG(path string, seed uint32) error {
	const side, block = 200, 8
	img := image.NewRGBA(image.Rect(0, 0, side, side))
	x := seed*2654435761 + 1 // xorshift32 state, never 0
	for by := 0; by < side; by += block {
		for bx := 0; bx < side; bx += block {
			x ^= x << 13
			x ^= x >> 17
			x ^= x << 5
			c := color.RGBA{R: byte(x), G: byte(x >> 8), B: byte(x >> 16), A: 255}
			for y := by; y < by+block; y++ {
				for xx := bx; xx < bx+block; xx++ {
					img.SetRGBA(xx, y, c)
				}
			}
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		return err
	}
	return os.WriteFile(path, b.Bytes(), 0o644)
}
