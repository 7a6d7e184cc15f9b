// Command peerchart draws the side-by-side benchmark (bench/peer/run.sh) as
// an SVG: per target, throughput (req/s) and CPU per call of the proxy, the
// backend and Redis, read from the ratios.csv that bench/peer/summary.py
// writes. Standard library only, so that the chart is regenerated anywhere.
package main

import (
	"encoding/csv"
	"flag"
	"fmt"
	"log"
	"os"
	"strconv"
	"strings"
)

type row struct {
	target                       string
	rps, proxy, backend, redisUS float64
}

func main() {
	in := flag.String("in", "ratios.csv", "ratios.csv of a run")
	out := flag.String("out", "benchmarks-peer.svg", "SVG to write")
	flag.Parse()
	f, err := os.Open(*in)
	if err != nil {
		log.Fatal(err)
	}
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		log.Fatal(err)
	}
	var rows []row
	for _, r := range recs[1:] {
		num := func(i int) float64 { v, _ := strconv.ParseFloat(r[i], 64); return v }
		rows = append(rows, row{target: r[0], rps: num(1), proxy: num(2), backend: num(3), redisUS: num(4)})
	}
	if err := os.WriteFile(*out, []byte(draw(rows)), 0o644); err != nil {
		log.Fatal(err)
	}
}

// draw makes two horizontal bar charts side by side: throughput, and CPU
// per call stacked by process.
func draw(rows []row) string {
	const (
		w, rowH, top, labelW, chartW, gap = 940, 34, 60, 120, 300, 60 // w: room for the longest bar's label
	)
	h := top + rowH*len(rows) + 50
	var maxRPS, maxCPU float64
	for _, r := range rows {
		maxRPS = max(maxRPS, r.rps)
		maxCPU = max(maxCPU, r.proxy+r.backend+r.redisUS)
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	x1 := labelW
	x2 := labelW + chartW + gap + 40
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">Throughput (req/s, median of rounds)</text>`+"\n", x1)
	fmt.Fprintf(&b, `<text x="%d" y="24" font-size="14" font-weight="bold">CPU per call (µs, median of rounds)</text>`+"\n", x2)
	colors := []struct{ name, color string }{{"proxy", "#4e79a7"}, {"backend", "#f28e2b"}, {"redis", "#e15759"}}
	for i, c := range colors {
		fmt.Fprintf(&b, `<rect x="%d" y="36" width="10" height="10" fill="%s"/><text x="%d" y="45">%s</text>`+"\n", x2+i*90, c.color, x2+i*90+14, c.name)
	}
	for i, r := range rows {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end">%s</text>`+"\n", labelW-8, y+17, r.target)
		bw := int(float64(chartW) * r.rps / maxRPS)
		fill := "#76b7b2"
		if r.target == "edge" {
			fill = "#59a14f"
		}
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="22" fill="%s"/><text x="%d" y="%d">%.0f</text>`+"\n", x1, y+2, bw, fill, x1+bw+4, y+17, r.rps)
		x := x2
		for j, v := range []float64{r.proxy, r.backend, r.redisUS} {
			cw := int(float64(chartW) * v / maxCPU)
			fmt.Fprintf(&b, `<rect x="%d" y="%d" width="%d" height="22" fill="%s"><title>%s %.1f µs</title></rect>`+"\n", x, y+2, cw, colors[j].color, colors[j].name, v)
			x += cw
		}
		fmt.Fprintf(&b, `<text x="%d" y="%d">%.0f + %.0f + %.0f</text>`+"\n", x+4, y+17, r.proxy, r.backend, r.redisUS)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" fill="#555">2 shared cores, wrk -t2 -c32, interleaved rounds; ratios in docs/benchmarks.md</text>`+"\n", x1, h-16)
	b.WriteString("</svg>\n")
	return b.String()
}
