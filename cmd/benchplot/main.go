// Command benchplot draws the curves scripts/bench-scale.sh measures as PNG plots:
//
//	benchplot -in test-output -out docs
//
// reads <in>/scale-p1.tsv (connections, service req/s, bare req/s, service p99 ms, bare p99 ms)
// and <in>/scale-p2.tsv (rate, p50 ratio, p99 ratio, relay holds 0|1) and writes
// <out>/bench-p1.png and <out>/bench-p2.png. It is a module of its own so the service does not
// depend on the plotting library.
package main

import (
	"bufio"
	"flag"
	"log"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

func main() {
	in := flag.String("in", "test-output", "directory of the .tsv files")
	out := flag.String("out", "docs", "directory the PNG files go to")
	flag.Parse()
	if rows := readTSV(filepath.Join(*in, "scale-p1.tsv")); len(rows) > 0 {
		p1(rows, filepath.Join(*out, "bench-p1.png"))
	}
	if rows := readTSV(filepath.Join(*in, "scale-p2.tsv")); len(rows) > 0 {
		p2(rows, filepath.Join(*out, "bench-p2.png"))
	}
}

// readTSV returns the numeric rows of a tab-separated file, skipping a header line.
func readTSV(path string) [][]float64 {
	f, err := os.Open(path)
	if err != nil {
		if os.IsNotExist(err) {
			return nil
		}
		log.Fatal(err)
	}
	defer f.Close()
	var rows [][]float64
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var row []float64
		for _, field := range strings.Split(sc.Text(), "\t") {
			v, err := strconv.ParseFloat(strings.TrimSpace(field), 64)
			if err != nil {
				row = nil
				break
			}
			row = append(row, v)
		}
		if row != nil {
			rows = append(rows, row)
		}
	}
	if err := sc.Err(); err != nil {
		log.Fatal(err)
	}
	return rows
}

// column is the points (row[x], row[y]) of the rows where both are numbers.
func column(rows [][]float64, x, y int) plotter.XYs {
	xy := make(plotter.XYs, 0, len(rows))
	for _, r := range rows {
		if len(r) > y && !math.IsNaN(r[x]) && !math.IsNaN(r[y]) {
			xy = append(xy, plotter.XY{X: r[x], Y: r[y]})
		}
	}
	return xy
}

// p1 draws throughput and p99 of GET /api/me/databases and of the bare handler by connections.
func p1(rows [][]float64, path string) {
	tput := plot.New()
	tput.Title.Text = "P1 GET /api/me/databases: throughput"
	tput.X.Label.Text = "connections"
	tput.Y.Label.Text = "requests/s"
	tput.X.Scale, tput.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	tput.Legend.Left = true
	must(plotutil.AddLinePoints(tput, "service", column(rows, 0, 1), "bare Fiber handler", column(rows, 0, 2)))
	lat := plot.New()
	lat.Title.Text = "P1 GET /api/me/databases: p99"
	lat.X.Label.Text = "connections"
	lat.Y.Label.Text = "p99 ms"
	lat.X.Scale, lat.X.Tick.Marker = plot.LogScale{}, plot.LogTicks{}
	lat.Legend.Left = true
	must(plotutil.AddLinePoints(lat, "service", column(rows, 0, 3), "bare Fiber handler", column(rows, 0, 4)))
	save(path, tput, lat)
}

// p2 draws the gateway's added latency ÷ the bare relay's, p50 and p99, by request rate at the
// rates where the relay held (at every rate, so titled, when it held at none), with the targets.
func p2(all [][]float64, path string) {
	var rows [][]float64
	for _, r := range all {
		if len(r) > 3 && r[3] == 1 {
			rows = append(rows, r)
		}
	}
	p := plot.New()
	p.Title.Text = "P2 gateway ÷ bare relay, added latency"
	if len(rows) == 0 {
		rows = all
		p.Title.Text += " (relay held at no rate)"
	}
	p.X.Label.Text = "requests/s"
	p.Y.Label.Text = "ratio"
	first, last := rows[0][0], rows[len(rows)-1][0]
	must(plotutil.AddLinePoints(p, "p50", column(rows, 0, 1), "p99", column(rows, 0, 2)))
	must(plotutil.AddLines(p, "p50 target 1.15", plotter.XYs{{X: first, Y: 1.15}, {X: last, Y: 1.15}},
		"p99 target 1.5", plotter.XYs{{X: first, Y: 1.5}, {X: last, Y: 1.5}}))
	save(path, p)
}

// save writes the plots side by side as one PNG.
func save(path string, plots ...*plot.Plot) {
	const w, h = 5 * vg.Inch, 3.5 * vg.Inch
	img := vgimgCanvas(w*vg.Length(len(plots)), h)
	for i, p := range plots {
		p.Legend.Top = true
		p.Draw(img.sub(vg.Length(i)*w, w, h))
	}
	must(img.save(path))
}

func must(err error) {
	if err != nil {
		log.Fatal(err)
	}
}
