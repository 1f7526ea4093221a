package main

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// The plots' file names.
const (
	plotChainTime = "bench-growth-chain.png"
	plotContracts = "bench-growth-contracts.png"
)

// plotNamed returns the path of the plot name as the Markdown links it, or
// "" when it was not written.
func plotNamed(r *Result, name string) string {
	for _, p := range r.Plots {
		if filepath.Base(p) == name {
			return p
		}
	}
	return ""
}

// writePlots writes the growth plots into dir and returns their paths.
func writePlots(r *Result, dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var out []string
	if len(r.ChainGrowth) > 0 {
		p := filepath.Join(dir, plotChainTime)
		if err := plotChainGrowth(r, p); err != nil {
			return nil, fmt.Errorf("plotting %s: %w", p, err)
		}
		out = append(out, p)
	}
	if len(r.Contracts) > 0 {
		p := filepath.Join(dir, plotContracts)
		if err := plotContractGrowth(r, p); err != nil {
			return nil, fmt.Errorf("plotting %s: %w", p, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// plotChainGrowth draws elapsed time and RSS against blocks committed, one
// line per store, from the samples.
func plotChainGrowth(r *Result, path string) error {
	elapsed := newPlot("Time to follow the chain", "blocks committed", "seconds since the start")
	rss := newPlot("Resident memory (RSS)", "blocks committed", "MB")
	var tv, rv []any
	for _, g := range r.ChainGrowth {
		var t, m plotter.XYs
		for _, s := range g.Samples {
			if s.Blocks == 0 {
				continue
			}
			t = append(t, plotter.XY{X: float64(s.Blocks), Y: s.Seconds})
			m = append(m, plotter.XY{X: float64(s.Blocks), Y: float64(s.RSS) / 1e6})
		}
		if len(t) == 0 {
			continue
		}
		tv = append(tv, runLabel(g), t)
		rv = append(rv, runLabel(g), m)
	}
	if len(tv) > 0 {
		// A straight line through the origin and the last point of the
		// service on SQLite (or of the first run): a cost per block that does
		// not change lies on it.
		ref := 0
		for i := 0; i < len(tv); i += 2 {
			if tv[i] == "service, sqlite" {
				ref = i
			}
		}
		pts := tv[ref+1].(plotter.XYs)
		tv = append(tv, "linear ("+tv[ref].(string)+")", plotter.XYs{{X: 0, Y: 0}, pts[len(pts)-1]})
		if err := plotutil.AddLines(elapsed, tv...); err != nil {
			return err
		}
		if err := plotutil.AddLines(rss, rv...); err != nil {
			return err
		}
	}
	rss.Y.Min, rss.X.Min, elapsed.X.Min, elapsed.Y.Min = 0, 0, 0, 0
	elapsed.Legend.Top, elapsed.Legend.Left = true, true
	rss.Legend.Top, rss.Legend.Left = true, true
	return savePlots(path, 16*vg.Centimeter, 7*vg.Centimeter, elapsed, rss)
}

// plotContractGrowth draws query latency (at 16 clients, and of each list
// filter at one client) and ingest cost against the number of contracts,
// one line per store, on logarithmic scales.
func plotContractGrowth(r *Result, path string) error {
	lat := newPlot("Query latency, 16 clients", "contracts", "ms")
	byFilter := newPlot("List p50 by filter, 1 client", "contracts", "ms")
	cost := newPlot("Ingest cost per record", "contracts", "ms per record")
	for _, p := range []*plot.Plot{lat, byFilter, cost} {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	for _, p := range []*plot.Plot{lat, byFilter} {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{}
	}
	phases := map[string][]ContractsPhase{}
	var order []string
	for _, ph := range r.Contracts {
		if ph.Contracts <= 0 {
			continue
		}
		if _, ok := phases[ph.Backend]; !ok {
			order = append(order, ph.Backend)
		}
		phases[ph.Backend] = append(phases[ph.Backend], ph)
	}
	// positive keeps the points a logarithmic axis can show.
	positive := func(xys plotter.XYs) plotter.XYs {
		var out plotter.XYs
		for _, p := range xys {
			if p.X > 0 && p.Y > 0 {
				out = append(out, p)
			}
		}
		return out
	}
	var lv, fv, cv []any
	for _, b := range order {
		var lp50, lp99, sp50, sp99, cpu, commit plotter.XYs
		filters := map[string]plotter.XYs{}
		var filterOrder []string
		for _, ph := range phases[b] {
			x := float64(ph.Contracts)
			lk, ls := phaseQuery(ph, opLookup), phaseQuery(ph, opList)
			lp50 = append(lp50, plotter.XY{X: x, Y: lk.P50Ms})
			lp99 = append(lp99, plotter.XY{X: x, Y: lk.P99Ms})
			sp50 = append(sp50, plotter.XY{X: x, Y: ls.P50Ms})
			sp99 = append(sp99, plotter.XY{X: x, Y: ls.P99Ms})
			cpu = append(cpu, plotter.XY{X: x, Y: ph.CPUMsPerRecord})
			commit = append(commit, plotter.XY{X: x, Y: ph.CommitMsPerRecord})
			for _, q := range ph.Query {
				if q.Op != opList || q.Clients != minClients(ph) {
					continue
				}
				for _, f := range q.Filters {
					name := f.Filter
					if strings.HasPrefix(name, "tag=") {
						name = "tag"
					}
					if _, ok := filters[name]; !ok {
						filterOrder = append(filterOrder, name)
					}
					filters[name] = append(filters[name], plotter.XY{X: x, Y: f.P50Ms})
				}
			}
		}
		lv = append(lv, b+" lookup p50", positive(lp50), b+" lookup p99", positive(lp99),
			b+" list p50", positive(sp50), b+" list p99", positive(sp99))
		for _, f := range filterOrder {
			fv = append(fv, b+" "+f, positive(filters[f]))
		}
		cv = append(cv, b+" CPU", cpu, b+" commit", commit)
	}
	for _, add := range []struct {
		p  *plot.Plot
		vs []any
	}{{lat, lv}, {byFilter, fv}, {cost, cv}} {
		if len(add.vs) == 0 {
			continue
		}
		if err := plotutil.AddLinePoints(add.p, add.vs...); err != nil {
			return err
		}
		add.p.Legend.Top, add.p.Legend.Left = true, true
	}
	cost.Y.Min = 0
	return savePlots(path, 27*vg.Centimeter, 9*vg.Centimeter, lat, byFilter, cost)
}

// logTicks are logarithmic ticks labelled as plain numbers.
type logTicks struct{}

// Ticks implements plot.Ticker.
func (logTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = plainLabel(ts[i].Value)
		}
	}
	return ts
}

// plainTicks are the default ticks labelled as plain numbers: integers
// with thousands separators, others as short as they go.
type plainTicks struct{}

// Ticks implements plot.Ticker.
func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label == "" {
			continue
		}
		ts[i].Label = plainLabel(ts[i].Value)
	}
	return ts
}

// plainLabel labels a tick: an integer with thousands separators, other
// numbers as short as they go.
func plainLabel(v float64) string {
	if v == math.Trunc(v) {
		return commas(v)
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// newPlot returns a plot with a title and axis labels.
func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.X.Tick.Marker, p.Y.Tick.Marker = plainTicks{}, plainTicks{}
	p.Add(plotter.NewGrid())
	p.Legend.TextStyle.Font.Size = vg.Points(7)
	return p
}

// savePlots draws plots side by side into a PNG file.
func savePlots(path string, width, height vg.Length, plots ...*plot.Plot) error {
	img := vgimg.NewWith(vgimg.UseWH(width, height), vgimg.UseDPI(120))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: 1, Cols: len(plots), PadX: vg.Centimeter, PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2,
		PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	canvases := plot.Align([][]*plot.Plot{plots}, tiles, dc)
	for i, p := range plots {
		p.Draw(canvases[0][i])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
