package sim

import (
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// WriteCharts writes one PNG per scenario into dir (<scenario>.png) and
// returns the paths.
func (r *Report) WriteCharts(dir string) ([]string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var paths []string
	for _, sc := range r.Scenarios {
		rs := r.ResultsFor(sc.Name)
		if len(rs) == 0 {
			continue
		}
		path := filepath.Join(dir, sc.Name+".png")
		f, err := os.Create(path)
		if err != nil {
			return paths, err
		}
		err = WriteChart(f, sc, rs)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return paths, fmt.Errorf("chart %s: %w", sc.Name, err)
		}
		paths = append(paths, path)
	}
	return paths, nil
}

// WriteChart draws the partitions owned per member over time, one panel
// per policy, from a minute before the end of the warm-up (x = 0 is the
// first step). Fleets of more than SeriesMembers members are drawn as the
// least, mean and most loaded member. Unowned partitions are drawn in red
// and double-owned ones in black, dashed, when they fit the scale.
func WriteChart(w io.Writer, sc ScenarioInfo, rs []*Result) error {
	const panelH = 3.2 * vg.Inch
	width := 10 * vg.Inch
	plots := make([][]*plot.Plot, len(rs))
	for i, res := range rs {
		p, err := panel(sc, res)
		if err != nil {
			return err
		}
		plots[i] = []*plot.Plot{p}
	}
	img := vgimg.New(width, panelH*vg.Length(len(rs)))
	dc := draw.New(img)
	dc.SetColor(color.White)
	dc.Fill(dc.Rectangle.Path())
	tiles := draw.Tiles{Rows: len(rs), Cols: 1, PadTop: vg.Points(4), PadBottom: vg.Points(4), PadLeft: vg.Points(4), PadRight: vg.Points(4), PadY: vg.Points(8)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	_, err := vgimg.PngCanvas{Canvas: img}.WriteTo(w)
	return err
}

func panel(sc ScenarioInfo, res *Result) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("%s: %s", sc.Name, res.Policy)
	if res.Err != "" {
		p.Title.Text += " (error: " + res.Err + ")"
		return p, nil
	}
	m := res.Metrics
	p.Title.Text += fmt.Sprintf("  balance %s, owned %s, moves %d/%d, double %.0f partition-s",
		fmtDur(m.TimeToBalance), fmtDur(m.TimeToOwned), m.Moves, m.MinMoves, m.DoubleSeconds)
	p.X.Label.Text = "seconds after the warm-up"
	p.Y.Label.Text = "partitions owned"
	from := seriesStart(res)
	s := SeriesOf(res, from, time.Second)
	if s == nil {
		return p, nil
	}
	x0 := from.Seconds() - res.WarmupEnd.Seconds()
	xy := func(vals func(i int) (float64, bool), n int) plotter.XYs {
		var pts plotter.XYs
		for i := 0; i < n; i++ {
			if v, ok := vals(i); ok {
				pts = append(pts, plotter.XY{X: x0 + float64(i)*s.StepSeconds, Y: v})
			}
		}
		return pts
	}
	n := len(s.Unowned)
	add := func(name string, pts plotter.XYs, c color.Color, dashed bool, legend bool) error {
		if len(pts) == 0 {
			return nil
		}
		l, err := plotter.NewLine(pts)
		if err != nil {
			return err
		}
		l.Color = c
		l.Width = vg.Points(1.2)
		if dashed {
			l.Dashes = []vg.Length{vg.Points(4), vg.Points(2)}
		}
		p.Add(l)
		if legend {
			p.Legend.Add(name, l)
		}
		return nil
	}
	maxHeld := int32(1)
	for _, v := range s.MaxHeld {
		maxHeld = max(maxHeld, v)
	}
	if s.Members != nil {
		legend := len(s.Members) <= 8
		for j, id := range s.Members {
			held := s.Held[j]
			if err := add(id, xy(func(i int) (float64, bool) { return float64(held[i]), held[i] >= 0 }, n), plotutil.Color(j), false, legend); err != nil {
				return nil, err
			}
		}
	} else {
		for k, c := range []struct {
			name string
			vals func(i int) float64
		}{
			{"least loaded", func(i int) float64 { return float64(s.MinHeld[i]) }},
			{"mean", func(i int) float64 { return float64(s.MeanHeld[i]) }},
			{"most loaded", func(i int) float64 { return float64(s.MaxHeld[i]) }},
		} {
			if err := add(c.name, xy(func(i int) (float64, bool) { return c.vals(i), true }, n), plotutil.Color(k), false, true); err != nil {
				return nil, err
			}
		}
	}
	// Unowned and double-owned partitions, if they fit the scale.
	var maxUnowned, maxDouble int32
	for i := range n {
		maxUnowned = max(maxUnowned, s.Unowned[i])
		maxDouble = max(maxDouble, s.Double[i])
	}
	for _, extra := range []struct {
		name string
		vals []int32
		peak int32
		c    color.Color
	}{
		{"unowned", s.Unowned, maxUnowned, color.RGBA{R: 220, A: 255}},
		{"double-owned", s.Double, maxDouble, color.Black},
	} {
		if extra.peak == 0 {
			continue
		}
		if extra.peak > 2*maxHeld {
			p.Title.Text += fmt.Sprintf(", %s peak %d (off scale)", extra.name, extra.peak)
			continue
		}
		vals := extra.vals
		if err := add(extra.name, xy(func(i int) (float64, bool) { return float64(vals[i]), true }, n), extra.c, true, true); err != nil {
			return nil, err
		}
	}
	p.Legend.Top = true
	p.Legend.Left = false
	p.Y.Min = 0
	return p, nil
}
