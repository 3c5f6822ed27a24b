package costs

import (
	"fmt"
	"html"
	"math"
	"strings"
)

// The charts are SVG drawn here rather than a JavaScript charting library:
// the page then renders with no network, no script and nothing to vendor,
// is byte-for-byte deterministic (testable), prints, and stays small.

// series is one coloured series of a chart.
type series struct {
	Name   string
	Color  string
	Values []float64
}

const (
	chartW, chartH = 880, 300
	padL, padR     = 78, 16
	padT, padB     = 36, 64
)

// niceScale returns a rounded maximum and tick step covering max.
func niceScale(max float64) (top, step float64) {
	if max <= 0 || math.IsNaN(max) || math.IsInf(max, 0) {
		return 1, 0.25
	}
	raw := max / 4
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if step = m * mag; step >= raw {
			break
		}
	}
	return math.Ceil(max/step-1e-9) * step, step
}

// usdLabel prints an axis or bar value in dollars with sensible precision.
func usdLabel(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "$0"
	case a >= 1000:
		return "$" + groupThousands(fmt.Sprintf("%.0f", v))
	case a >= 10:
		return fmt.Sprintf("$%.0f", v)
	case a >= 0.1:
		return fmt.Sprintf("$%.2f", v)
	case a >= 0.001:
		return fmt.Sprintf("$%.4f", v)
	default:
		return fmt.Sprintf("$%.2g", v)
	}
}

func groupThousands(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

type svgBuilder struct{ strings.Builder }

func (b *svgBuilder) f(format string, args ...any) { fmt.Fprintf(&b.Builder, format, args...) }

func esc(s string) string { return html.EscapeString(s) }

func (b *svgBuilder) open(label string, w, h int) {
	b.f(`<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img" aria-label="%s" font-family="sans-serif" font-size="11">`, w, h, w, h, esc(label))
}

// legend draws the series names in one row along the top.
func (b *svgBuilder) legend(ss []series, x, y int) {
	for _, s := range ss {
		b.f(`<rect x="%d" y="%d" width="10" height="10" fill="%s"/><text x="%d" y="%d">%s</text>`, x, y-9, s.Color, x+14, y, esc(s.Name))
		x += 28 + int(6.6*float64(len(s.Name)))
		if x > chartW-120 {
			x, y = padL, y+14
		}
	}
}

// yAxis draws horizontal grid lines and labels from 0 to top.
func (b *svgBuilder) yAxis(top, step float64, label func(float64) string) {
	plotH := float64(chartH - padT - padB)
	for v := 0.0; v <= top+step/2; v += step {
		y := float64(chartH-padB) - v/top*plotH
		b.f(`<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#e4e4e4"/>`, padL, y, chartW-padR, y)
		b.f(`<text x="%d" y="%.1f" text-anchor="end">%s</text>`, padL-6, y+4, esc(label(v)))
	}
	b.f(`<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#888"/>`, padL, chartH-padB, chartW-padR, chartH-padB)
}

// xLabels draws category labels under the bars, thinned to fit.
func (b *svgBuilder) xLabels(cats []string, x func(i int) float64) {
	every := int(math.Ceil(float64(len(cats)) / 16))
	for i, c := range cats {
		if i%every != 0 {
			continue
		}
		b.f(`<text x="%.1f" y="%d" text-anchor="end" transform="rotate(-35 %.1f %d)">%s</text>`, x(i), chartH-padB+14, x(i), chartH-padB+14, esc(c))
	}
}

// stackedBars draws one bar per category, the series stacked.
func stackedBars(title string, cats []string, ss []series, label func(float64) string) string {
	var b svgBuilder
	b.open(title, chartW, chartH)
	top, step := niceScale(stackMax(len(cats), ss))
	b.yAxis(top, step, label)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	slot := plotW / float64(max1(len(cats)))
	barW := math.Max(2, math.Min(60, slot*0.7))
	center := func(i int) float64 { return float64(padL) + slot*(float64(i)+0.5) }
	for i := range cats {
		y := float64(chartH - padB)
		for _, s := range ss {
			v := math.Max(0, s.Values[i])
			if v == 0 {
				continue
			}
			h := v / top * plotH
			y -= h
			b.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" shape-rendering="crispEdges"><title>%s %s: %s</title></rect>`,
				center(i)-barW/2, y, barW, h, s.Color, esc(cats[i]), esc(s.Name), esc(label(v)))
		}
	}
	b.xLabels(cats, center)
	b.legend(ss, padL, 16)
	b.WriteString(`</svg>`)
	return b.String()
}

// groupedBars draws the series side by side in each category, with an
// optional note above each group.
func groupedBars(title string, cats []string, ss []series, label func(float64) string, notes []string) string {
	var b svgBuilder
	b.open(title, chartW, chartH)
	max := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			max = math.Max(max, v)
		}
	}
	top, step := niceScale(max * 1.08)
	b.yAxis(top, step, label)
	plotW, plotH := float64(chartW-padL-padR), float64(chartH-padT-padB)
	slot := plotW / float64(max1(len(cats)))
	groupW := math.Max(2, math.Min(80, slot*0.8))
	barW := groupW / float64(max1(len(ss)))
	center := func(i int) float64 { return float64(padL) + slot*(float64(i)+0.5) }
	for i := range cats {
		x0 := center(i) - groupW/2
		groupTop := float64(chartH - padB)
		for k, s := range ss {
			v := math.Max(0, s.Values[i])
			h := v / top * plotH
			y := float64(chartH-padB) - h
			groupTop = math.Min(groupTop, y)
			b.f(`<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" shape-rendering="crispEdges"><title>%s %s: %s</title></rect>`,
				x0+float64(k)*barW, y, math.Max(1, barW-1), h, s.Color, esc(cats[i]), esc(s.Name), esc(label(v)))
		}
		if i < len(notes) && notes[i] != "" && slot >= 36 {
			b.f(`<text x="%.1f" y="%.1f" text-anchor="middle" fill="#333">%s</text>`, center(i), groupTop-4, esc(notes[i]))
		}
	}
	b.xLabels(cats, center)
	b.legend(ss, padL, 16)
	b.WriteString(`</svg>`)
	return b.String()
}

// hBars draws one horizontal bar per label, the series stacked.
func hBars(title string, labels []string, ss []series, label func(float64) string) string {
	var b svgBuilder
	rowH := 22
	h := padT + rowH*max1(len(labels)) + 28
	b.open(title, chartW, h)
	top, step := niceScale(stackMax(len(labels), ss))
	left := 170
	plotW := float64(chartW - left - padR - 70)
	for v := 0.0; v <= top+step/2; v += step {
		x := float64(left) + v/top*plotW
		b.f(`<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#e4e4e4"/>`, x, padT-4, x, h-24)
		b.f(`<text x="%.1f" y="%d" text-anchor="middle">%s</text>`, x, h-10, esc(label(v)))
	}
	for i, l := range labels {
		y := padT + i*rowH
		b.f(`<text x="%d" y="%d" text-anchor="end">%s</text>`, left-6, y+14, esc(l))
		x, total := float64(left), 0.0
		for _, s := range ss {
			v := math.Max(0, s.Values[i])
			if v == 0 {
				continue
			}
			w := v / top * plotW
			b.f(`<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" shape-rendering="crispEdges"><title>%s %s: %s</title></rect>`,
				x, y+2, w, rowH-6, s.Color, esc(l), esc(s.Name), esc(label(v)))
			x += w
			total += v
		}
		b.f(`<text x="%.1f" y="%d">%s</text>`, x+4, y+14, esc(label(total)))
	}
	b.legend(ss, left, 16)
	b.WriteString(`</svg>`)
	return b.String()
}

func max1(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

// stackMax is the largest sum of the series' non-negative values over the
// first n categories.
func stackMax(n int, ss []series) float64 {
	top := 0.0
	for i := range n {
		t := 0.0
		for _, s := range ss {
			t += math.Max(0, s.Values[i])
		}
		top = math.Max(top, t)
	}
	return top
}
