package local

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"image/color"
	"io"
)

var errPNG = errors.New("local: malformed PNG")

// PNG colour types.
const (
	ctGray      = 0
	ctTrue      = 2
	ctPaletted  = 3
	ctGrayAlpha = 4
	ctTrueAlpha = 6
)

// adam7 is the interlace passes: x offset, y offset, x step, y step.
var adam7 = [7][4]int{{0, 0, 8, 8}, {4, 0, 8, 8}, {0, 4, 4, 8}, {2, 0, 4, 4}, {0, 2, 2, 4}, {1, 0, 2, 2}, {0, 1, 1, 2}}

// decodePNG streams a PNG's pixels into c a row at a time, with the
// colours image/png's decoded image would give (so the output is the one a
// whole decode would draw), holding two rows of the source at a time.
func decodePNG(data []byte, c *cover) error {
	if !bytes.HasPrefix(data, []byte("\x89PNG\r\n\x1a\n")) {
		return errPNG
	}
	var ihdr, plte, trns []byte
	var idat []io.Reader
	seenIDAT, afterIDAT := false, false
	for p := data[8:]; ; {
		if len(p) < 12 {
			return errPNG
		}
		n := binary.BigEndian.Uint32(p)
		if n > uint32(len(p)-12) {
			return errPNG
		}
		typ, body := string(p[4:8]), p[8:8+n]
		if crc32.ChecksumIEEE(p[4:8+n]) != binary.BigEndian.Uint32(p[8+n:]) {
			return errPNG
		}
		p = p[12+n:]
		if (ihdr == nil) != (typ == "IHDR") {
			return errPNG // IHDR first, and once
		}
		if seenIDAT && typ != "IDAT" {
			afterIDAT = true
		}
		switch typ {
		case "IHDR":
			ihdr = body
		case "PLTE":
			if plte != nil || seenIDAT {
				return errPNG
			}
			plte = body
		case "tRNS":
			if trns != nil || seenIDAT {
				return errPNG
			}
			trns = body
		case "IDAT":
			if afterIDAT {
				return errPNG
			}
			seenIDAT = true
			idat = append(idat, bytes.NewReader(body))
		case "IEND":
			if !seenIDAT {
				return errPNG
			}
			return decodeIDAT(ihdr, plte, trns, io.MultiReader(idat...), c)
		}
	}
}

// pngColor turns one pixel of an unfiltered row into premultiplied 16-bit
// red, green and blue.
type pngColor func(row []byte, x int) (r, g, b uint32)

func decodeIDAT(ihdr, plte, trns []byte, z io.Reader, c *cover) error {
	if len(ihdr) != 13 {
		return errPNG
	}
	width, height := int(binary.BigEndian.Uint32(ihdr)), int(binary.BigEndian.Uint32(ihdr[4:]))
	depth, ct, interlace := int(ihdr[8]), ihdr[9], ihdr[12]
	if ihdr[10] != 0 || ihdr[11] != 0 || interlace > 1 || width <= 0 || height <= 0 ||
		width > maxInputSide || height > maxInputSide || len(c.cols.first) != width+1 || len(c.rows.first) != height+1 {
		return errPNG
	}
	px, channels, err := pngColors(depth, ct, plte, trns)
	if err != nil {
		return err
	}
	bits := depth * channels
	bpp := max(1, bits/8)
	zr, err := zlib.NewReader(z)
	if err != nil {
		return errPNG
	}
	defer zr.Close()
	rowBytes := (bits*width + 7) / 8
	prev, cur := make([]byte, rowBytes+1), make([]byte, rowBytes+1)
	passes := [][4]int{{0, 0, 1, 1}}
	if interlace == 1 {
		passes = adam7[:]
	}
	for _, ps := range passes {
		pw, ph := (width-ps[0]+ps[2]-1)/ps[2], (height-ps[1]+ps[3]-1)/ps[3]
		if pw == 0 || ph == 0 {
			continue
		}
		n := (bits*pw+7)/8 + 1
		clear(prev[:n])
		for py := range ph {
			if _, err := io.ReadFull(zr, cur[:n]); err != nil {
				return errPNG
			}
			if err := unfilter(cur[:n], prev[:n], bpp); err != nil {
				return err
			}
			if y := ps[1] + py*ps[3]; c.wantRow(y) {
				row := cur[1:n]
				for x := range pw {
					if sx := ps[0] + x*ps[2]; c.wantCol(sx) {
						r, g, b := px(row, x)
						c.put(sx, y, r, g, b)
					}
				}
			}
			prev, cur = cur, prev
		}
	}
	// As image/png: the stream ends here (this also checks its checksum).
	var one [1]byte
	if n, err := io.ReadFull(zr, one[:]); n != 0 || err != io.EOF {
		return errPNG
	}
	return nil
}

// unfilter reverses row filtering in place; row[0] is the filter type.
func unfilter(row, prev []byte, bpp int) error {
	cdat, pdat := row[1:], prev[1:]
	switch row[0] {
	case 0:
	case 1:
		for i := bpp; i < len(cdat); i++ {
			cdat[i] += cdat[i-bpp]
		}
	case 2:
		for i, p := range pdat {
			cdat[i] += p
		}
	case 3:
		for i := range cdat {
			var left byte
			if i >= bpp {
				left = cdat[i-bpp]
			}
			cdat[i] += byte((int(left) + int(pdat[i])) / 2)
		}
	case 4:
		for i := range cdat {
			var a, c int
			if i >= bpp {
				a, c = int(cdat[i-bpp]), int(pdat[i-bpp])
			}
			b := int(pdat[i])
			pa, pb, pc := abs(b-c), abs(a-c), abs(a+b-2*c)
			switch {
			case pa <= pb && pa <= pc:
				cdat[i] += byte(a)
			case pb <= pc:
				cdat[i] += byte(b)
			default:
				cdat[i] += byte(c)
			}
		}
	default:
		return errPNG
	}
	return nil
}

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

// pngColors checks the depth and colour type (and their PLTE and tRNS
// chunks, as image/png does) and returns the pixel reader and the
// channels a pixel has.
func pngColors(depth int, ct byte, plte, trns []byte) (pngColor, int, error) {
	if plte != nil && ct != ctPaletted && ct != ctTrue && ct != ctTrueAlpha {
		return nil, 0, errPNG
	}
	switch ct {
	case ctGray:
		px, err := grayColors(depth, trns)
		return px, 1, err
	case ctTrue:
		px, err := trueColors(depth, trns)
		return px, 3, err
	case ctPaletted:
		px, err := paletteColors(depth, plte, trns)
		return px, 1, err
	case ctGrayAlpha, ctTrueAlpha:
		return alphaColors(depth, ct == ctGrayAlpha, trns)
	}
	return nil, 0, errPNG
}

func be16(b []byte) uint32 { return uint32(b[0])<<8 | uint32(b[1]) }

// grayColors reads greyscale pixels; tRNS names one transparent grey.
func grayColors(depth int, trns []byte) (pngColor, error) {
	if trns != nil && len(trns) != 2 {
		return nil, errPNG
	}
	useT := trns != nil
	switch depth {
	case 1, 2, 4, 8:
		scale := byte(0xff / (1<<depth - 1)) // a sub-byte sample, scaled to 8 bits
		var ty byte
		if useT {
			ty = trns[1] * scale
		}
		return func(row []byte, x int) (uint32, uint32, uint32) {
			var y byte
			if depth < 8 {
				shift := 8 - depth - (x*depth)%8
				y = row[x*depth/8] >> shift & (1<<depth - 1) * scale
			} else {
				y = row[x]
			}
			if useT && y == ty {
				return 0, 0, 0
			}
			v, _, _, _ := color.Gray{y}.RGBA()
			return v, v, v
		}, nil
	case 16:
		var ty uint32
		if useT {
			ty = be16(trns)
		}
		return func(row []byte, x int) (uint32, uint32, uint32) {
			y := be16(row[2*x:])
			if useT && y == ty {
				return 0, 0, 0
			}
			return y, y, y
		}, nil
	}
	return nil, errPNG
}

// trueColors reads RGB pixels; tRNS names one transparent colour.
func trueColors(depth int, trns []byte) (pngColor, error) {
	if trns != nil && len(trns) != 6 {
		return nil, errPNG
	}
	useT := trns != nil
	switch depth {
	case 8:
		return func(row []byte, x int) (uint32, uint32, uint32) {
			p := row[3*x:]
			if useT && p[0] == trns[1] && p[1] == trns[3] && p[2] == trns[5] {
				return 0, 0, 0
			}
			r, g, b, _ := color.RGBA{p[0], p[1], p[2], 0xff}.RGBA()
			return r, g, b
		}, nil
	case 16:
		return func(row []byte, x int) (uint32, uint32, uint32) {
			p := row[6*x:]
			r, g, b := be16(p), be16(p[2:]), be16(p[4:])
			if useT && r == be16(trns) && g == be16(trns[2:]) && b == be16(trns[4:]) {
				return 0, 0, 0
			}
			return r, g, b
		}, nil
	}
	return nil, errPNG
}

// paletteColors reads palette indices; tRNS holds the entries' alphas.
func paletteColors(depth int, plte, trns []byte) (pngColor, error) {
	if depth != 1 && depth != 2 && depth != 4 && depth != 8 {
		return nil, errPNG
	}
	np := len(plte) / 3
	if plte == nil || len(plte)%3 != 0 || np == 0 || np > 1<<depth || len(trns) > 256 {
		return nil, errPNG
	}
	var pal [256][3]uint32 // beyond the palette: opaque black, as image/png
	for i := range pal {
		col := color.Color(color.RGBA{0, 0, 0, 0xff})
		if i < np {
			col = color.RGBA{plte[3*i], plte[3*i+1], plte[3*i+2], 0xff}
		}
		if i < len(trns) {
			rgba := col.(color.RGBA)
			col = color.NRGBA{rgba.R, rgba.G, rgba.B, trns[i]}
		}
		pal[i][0], pal[i][1], pal[i][2], _ = col.RGBA()
	}
	return func(row []byte, x int) (uint32, uint32, uint32) {
		if depth == 8 {
			return pal[row[x]][0], pal[row[x]][1], pal[row[x]][2]
		}
		shift := 8 - depth - (x*depth)%8
		i := row[x*depth/8] >> shift & (1<<depth - 1)
		return pal[i][0], pal[i][1], pal[i][2]
	}, nil
}

// alphaColors reads grey or RGB pixels with alpha (no tRNS allowed), and
// returns their channels.
func alphaColors(depth int, gray bool, trns []byte) (pngColor, int, error) {
	if trns != nil {
		return nil, 0, errPNG
	}
	ch := 4
	if gray {
		ch = 2
	}
	switch depth {
	case 8:
		return func(row []byte, x int) (uint32, uint32, uint32) {
			p := row[ch*x:]
			c := color.NRGBA{p[0], p[0], p[0], p[1]}
			if !gray {
				c = color.NRGBA{p[0], p[1], p[2], p[3]}
			}
			r, g, b, _ := c.RGBA()
			return r, g, b
		}, ch, nil
	case 16:
		return func(row []byte, x int) (uint32, uint32, uint32) {
			p := row[2*ch*x:]
			c := color.NRGBA64{uint16(be16(p)), uint16(be16(p)), uint16(be16(p)), uint16(be16(p[2:]))}
			if !gray {
				c = color.NRGBA64{uint16(be16(p)), uint16(be16(p[2:])), uint16(be16(p[4:])), uint16(be16(p[6:]))}
			}
			r, g, b, _ := c.RGBA()
			return r, g, b
		}, ch, nil
	}
	return nil, 0, errPNG
}
