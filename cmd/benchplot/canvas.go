package main

import (
	"os"

	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// canvas is one PNG holding several plots side by side.
type canvas struct{ img *vgimg.Canvas }

func vgimgCanvas(w, h vg.Length) canvas {
	return canvas{img: vgimg.New(w, h)}
}

// sub is the part of the canvas from x, w wide and h high.
func (c canvas) sub(x, w, h vg.Length) draw.Canvas {
	dc := draw.New(c.img)
	return draw.Crop(dc, x, x+w-dc.Max.X, 0, h-dc.Max.Y)
}

func (c canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: c.img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
