package main

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// The -report page: one self-contained HTML file, charts drawn as inline
// SVG by this program. It loads nothing — no script, style sheet, font or
// image from anywhere — so it opens offline and can be mailed around. Each
// chart's viewBox scales it to the window's width. Its one inline script
// only lists the series drawn in an attribute of the page's body, for a
// test to read; it shows nothing.

// chart geometry, in SVG user units.
const (
	chartW, chartH       = 960.0, 200.0
	padL, padR           = 74.0, 150.0
	padT, padB           = 14.0, 44.0
	plotW, plotH         = chartW - padL - padR, chartH - padT - padB
	bandH, bandGap       = 22.0, 6.0
	minBin               = 10 * time.Millisecond
	reportBinsShortRun   = 20
	reportShortRunCutoff = 10 * time.Second
)

// palette: one colour per answer source, tier and breaker state.
var (
	sourceColors = map[string]string{"pro": "#2b6cb0", "legacy": "#805ad5", "flash": "#38a169", "cache": "#d69e2e", "default": "#d53f8c", "error": "#c53030"}
	stateColors  = map[breaker.State]string{breaker.Closed: "#c6f6d5", breaker.HalfOpen: "#fefcbf", breaker.Open: "#fed7d7"}
	// retiredColor marks a tier whose model is retired: skipped without a
	// call whatever its breaker says.
	retiredColor = "#a0aec0"
	kindColors   = map[string]string{"exact": "#d69e2e", "template": "#dd6b20", "semantic": "#319795", "simplified": "#81e6d9", "default": "#d53f8c", "tier": "#38a169", "error": "#c53030"}
	lineColors   = []string{"#2b6cb0", "#805ad5", "#38a169", "#c53030"}
)

// reportBin is the width of the report's time buckets: a second, or a
// twentieth of a run shorter than ten seconds.
func reportBin(d time.Duration) time.Duration {
	if d >= reportShortRunCutoff {
		return time.Second
	}
	return max(d/reportBinsShortRun, minBin)
}

// timeline is a run cut into bins.
type timeline struct {
	bin  time.Duration
	n    int
	span time.Duration // n bins
}

func newTimeline(d time.Duration) timeline {
	bin := reportBin(d)
	n := int((d + bin - 1) / bin)
	return timeline{bin: bin, n: n, span: time.Duration(n) * bin}
}

// at returns the bin of t, the last one for t past the end.
func (tl timeline) at(t time.Duration) int { return min(max(int(t/tl.bin), 0), tl.n-1) }

// x maps a time to the plot's x.
func (tl timeline) x(t time.Duration) float64 {
	return padL + plotW*float64(min(max(t, 0), tl.span))/float64(tl.span)
}

// binX is the x of the middle of bin i.
func (tl timeline) binX(i int) float64 {
	return tl.x(time.Duration(i)*tl.bin + tl.bin/2)
}

// series is one named line or area of a chart.
type series struct {
	id, label, color string
	values           []float64
}

// svgChart draws one chart.
type svgChart struct {
	tl     timeline
	phases []phase
	b      strings.Builder
	ymax   float64
	unit   string
	legend []series
	// xTitle and yTitle name the axes.
	xTitle, yTitle string
}

func newChart(tl timeline, ps []phase, ymax float64, unit, yTitle string) *svgChart {
	if ymax <= 0 || math.IsNaN(ymax) {
		ymax = 1
	}
	return &svgChart{tl: tl, phases: ps, ymax: niceCeil(ymax), unit: unit, xTitle: "time since the start", yTitle: yTitle}
}

// niceCeil rounds v up to 1, 2, 2.5 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func (c *svgChart) y(v float64) float64 { return padT + plotH*(1-min(v, c.ymax)/c.ymax) }

// frame draws the phase shading, the axes and the grid.
func (c *svgChart) frame(height float64) {
	for _, p := range c.phases {
		if p.label == "healthy" {
			continue
		}
		x0, x1 := c.tl.x(p.from), c.tl.x(p.to)
		fmt.Fprintf(&c.b, `<rect class="phase" data-phase="%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#edf2f7"/>`,
			template.HTMLEscapeString(p.label), x0, padT, x1-x0, height)
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="10" fill="#4a5568">%s</text>`, x0+3, padT+10, template.HTMLEscapeString(p.label))
	}
	// Time axis: a tick per fifth of the run.
	for i := 0; i <= 5; i++ {
		t := c.tl.span * time.Duration(i) / 5
		x := c.tl.x(t)
		fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#e2e8f0"/>`, x, x, padT, padT+height)
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="middle" fill="#4a5568">%s</text>`, x, padT+height+14, fmtSeconds(t))
	}
	fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#a0aec0"/>`, padL, padL+plotW, padT+height, padT+height)
	fmt.Fprintf(&c.b, `<text class="axis-title" x="%.1f" y="%.1f" font-size="11" text-anchor="middle" fill="#2d3748">%s</text>`,
		padL+plotW/2, padT+height+34, template.HTMLEscapeString(c.xTitle))
	if c.yTitle != "" {
		fmt.Fprintf(&c.b, `<text class="axis-title" transform="translate(%.1f %.1f) rotate(-90)" font-size="11" text-anchor="middle" fill="#2d3748">%s</text>`,
			14.0, padT+height/2, template.HTMLEscapeString(c.yTitle))
	}
}

// yAxis draws the value axis: four steps, or five when the top is 2.5 or
// 5 times a power of ten, so that the steps stay round.
func (c *svgChart) yAxis() {
	steps := 4
	if m := c.ymax / math.Pow(10, math.Floor(math.Log10(c.ymax))); m == 2.5 || m == 5 {
		steps = 5
	}
	for i := 0; i <= steps; i++ {
		v := c.ymax * float64(i) / float64(steps)
		y := c.y(v)
		fmt.Fprintf(&c.b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#edf2f7"/>`, padL, padL+plotW, y, y)
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="10" text-anchor="end" fill="#4a5568">%s</text>`, padL-4, y+3, fmtValue(v, c.unit))
	}
}

// stacked draws series as areas stacked in order.
func (c *svgChart) stacked(ss []series) {
	base := make([]float64, c.tl.n)
	for _, s := range ss {
		top := make([]float64, c.tl.n)
		for i := range top {
			top[i] = base[i] + s.values[i]
		}
		var pts []string
		for i := range c.tl.n {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.tl.binX(i), c.y(top[i])))
		}
		for i := c.tl.n - 1; i >= 0; i-- {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.tl.binX(i), c.y(base[i])))
		}
		fmt.Fprintf(&c.b, `<polygon data-series="%s" points="%s" fill="%s" fill-opacity="0.85" stroke="none"><title>%s</title></polygon>`,
			s.id, strings.Join(pts, " "), s.color, template.HTMLEscapeString(s.label))
		base = top
		c.legend = append(c.legend, s)
	}
}

// lines draws series as lines.
func (c *svgChart) lines(ss []series, dashed bool) {
	for _, s := range ss {
		var pts []string
		for i, v := range s.values {
			if math.IsNaN(v) {
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", c.tl.binX(i), c.y(v)))
		}
		dash := ""
		if dashed {
			dash = ` stroke-dasharray="5 3"`
		}
		fmt.Fprintf(&c.b, `<polyline data-series="%s" points="%s" fill="none" stroke="%s" stroke-width="2"%s><title>%s</title></polyline>`,
			s.id, strings.Join(pts, " "), s.color, dash, template.HTMLEscapeString(s.label))
		c.legend = append(c.legend, s)
	}
}

// hline draws a horizontal reference line.
func (c *svgChart) hline(id, label, color string, v float64) {
	y := c.y(v)
	fmt.Fprintf(&c.b, `<line data-series="%s" x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="1.5" stroke-dasharray="2 2"><title>%s</title></line>`,
		id, padL, padL+plotW, y, y, color, template.HTMLEscapeString(label))
	c.legend = append(c.legend, series{id: id, label: label, color: color})
}

// svg closes the chart with its legend.
func (c *svgChart) svg(title string, height float64) template.HTML {
	var out strings.Builder
	// No width or height: the viewBox scales the chart to its container,
	// the window's width.
	fmt.Fprintf(&out, `<figure><figcaption>%s</figcaption><svg viewBox="0 0 %.0f %.0f" preserveAspectRatio="xMinYMin meet" role="img" aria-label="%s">`,
		template.HTMLEscapeString(title), chartW, height+padT+padB, template.HTMLEscapeString(title))
	out.WriteString(c.b.String())
	for i, s := range c.legend {
		y := padT + 6 + float64(i)*16
		fmt.Fprintf(&out, `<rect x="%.1f" y="%.1f" width="10" height="10" fill="%s"/><text x="%.1f" y="%.1f" font-size="11" fill="#2d3748">%s</text>`,
			padL+plotW+12, y-8, s.color, padL+plotW+26, y+1, template.HTMLEscapeString(s.label))
	}
	out.WriteString(`</svg></figure>`)
	return template.HTML(out.String())
}

func fmtSeconds(d time.Duration) string {
	if d%time.Second == 0 {
		return fmt.Sprintf("%ds", int(d/time.Second))
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

func fmtValue(v float64, unit string) string {
	if unit == "s" {
		return round(time.Duration(v * float64(time.Second))).String()
	}
	if v == math.Trunc(v) {
		return fmt.Sprintf("%.0f%s", v, unit)
	}
	return fmt.Sprintf("%.1f%s", v, unit)
}

// reportData is what the page's template fills in.
type reportData struct {
	Title   string
	Summary []string
	Charts  []template.HTML
}

// writeReport writes the run as an HTML page, with the last act (both
// models down) if bd is not nil.
func (s *summary) writeReport(w io.Writer, bd *bothDownSummary) error {
	tl := newTimeline(s.cfg.Duration)
	ps := phases(s.cfg)
	perSec := 1 / tl.bin.Seconds()
	var charts []template.HTML

	// Answers by source, per second: who answered, stacked.
	bySource := make([][]float64, len(sources))
	for i := range bySource {
		bySource[i] = make([]float64, tl.n)
	}
	latencies := make([][]time.Duration, tl.n)
	calls := make([][]float64, numTiers)
	for i := range calls {
		calls[i] = make([]float64, tl.n)
	}
	for _, r := range s.records {
		b := tl.at(r.start)
		bySource[r.source][b] += perSec
		latencies[b] = append(latencies[b], r.latency)
		for t, n := range r.calls {
			calls[t][b] += float64(n) * perSec
		}
	}
	completed, incomplete := make([]float64, tl.n), make([]float64, tl.n)
	for _, r := range s.streamRecords {
		b := tl.at(r.start)
		switch r.end {
		case streamComplete:
			completed[b] += perSec
		case streamIncomplete:
			incomplete[b] += perSec
		}
		for t, n := range r.calls {
			calls[t][b] += float64(n) * perSec
		}
	}

	var stack []series
	peak := 0.0
	for i := range tl.n {
		sum := 0.0
		for src := range sources {
			sum += bySource[src][i]
		}
		peak = max(peak, sum)
	}
	for i, name := range sources {
		stack = append(stack, series{id: "answers/" + name, label: name, color: sourceColors[name], values: bySource[i]})
	}
	c := newChart(tl, ps, peak, "/s", "answers per second")
	c.frame(plotH)
	c.yAxis()
	c.stacked(stack)
	charts = append(charts, c.svg("Answers per second, by source (unary requests)", plotH))

	// Breaker state per tier: a band per breaker, grey where the tier's
	// model was retired (skipped without a call, whatever the breaker).
	retired := make([][]bool, numTiers)
	for i := range retired {
		retired[i] = make([]bool, tl.n)
	}
	for _, r := range s.records {
		for i := range numTiers {
			if r.retired&(1<<i) != 0 {
				retired[i][tl.at(r.start)] = true
			}
		}
	}
	bandsH := float64(len(tiers))*(bandH+bandGap) - bandGap
	c = newChart(tl, ps, 1, "", "")
	c.frame(bandsH)
	anyRetired := false
	for i, name := range tiers {
		y := padT + float64(i)*(bandH+bandGap)
		state, from := breaker.Closed, time.Duration(0)
		draw := func(to time.Duration) {
			x0, x1 := tl.x(from), tl.x(to)
			fmt.Fprintf(&c.b, `<rect data-series="breaker/%s/%s" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s</title></rect>`,
				name, state, x0, y, max(x1-x0, 0.5), bandH, stateColors[state], name, state)
		}
		for _, t := range s.transitions {
			if t.name != name || t.at > tl.span {
				continue
			}
			draw(t.at)
			state, from = t.to, t.at
		}
		draw(tl.span)
		// Retired stretches, over the breaker's state.
		for b := 0; b < tl.n; {
			if !retired[i][b] {
				b++
				continue
			}
			e := b
			for e < tl.n && retired[i][e] {
				e++
			}
			x0, x1 := tl.x(time.Duration(b)*tl.bin), tl.x(time.Duration(e)*tl.bin)
			fmt.Fprintf(&c.b, `<rect data-series="breaker/%s/retired" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s retired</title></rect>`,
				name, x0, y, x1-x0, bandH, retiredColor, name)
			fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="10" fill="#1a202c">model retired: skipped without a call</text>`, x0+4, y+bandH/2+4)
			anyRetired = true
			b = e
		}
		fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" font-size="11" text-anchor="end" fill="#2d3748">%s</text>`, padL-4, y+bandH/2+4, name)
	}
	for _, st := range []breaker.State{breaker.Closed, breaker.HalfOpen, breaker.Open} {
		c.legend = append(c.legend, series{id: "state/" + st.String(), label: st.String(), color: stateColors[st]})
	}
	if anyRetired {
		c.legend = append(c.legend, series{id: "state/retired", label: "retired", color: retiredColor})
	}
	charts = append(charts, c.svg("Circuit breaker state, per tier (grey: the tier's model is retired)", bandsH))

	// Latency percentiles against the deadline.
	p50, p99 := make([]float64, tl.n), make([]float64, tl.n)
	for i, l := range latencies {
		slices.Sort(l)
		p50[i], p99[i] = math.NaN(), math.NaN()
		if len(l) > 0 {
			p50[i], p99[i] = quantile(l, 0.50).Seconds(), quantile(l, 0.99).Seconds()
		}
	}
	c = newChart(tl, ps, s.cfg.Deadline.Seconds()*1.1, "s", "latency")
	c.frame(plotH)
	c.yAxis()
	c.lines([]series{{id: "latency/p50", label: "p50", color: lineColors[0], values: p50}, {id: "latency/p99", label: "p99", color: lineColors[3], values: p99}}, false)
	c.hline("latency/deadline", "deadline "+s.cfg.Deadline.String(), "#1a202c", s.cfg.Deadline.Seconds())
	charts = append(charts, c.svg("Latency of unary requests (p50, p99 per bucket) against the deadline", plotH))

	// Upstream calls per tier, unary and streams.
	peak = 0
	var callSeries []series
	for i, name := range tiers {
		peak = max(peak, slices.Max(calls[i]))
		callSeries = append(callSeries, series{id: "calls/" + name, label: name, color: sourceColors[name], values: calls[i]})
	}
	c = newChart(tl, ps, peak, "/s", "upstream calls per second")
	c.frame(plotH)
	c.yAxis()
	c.lines(callSeries, false)
	charts = append(charts, c.svg("Upstream calls per second, per tier (unary and streams)", plotH))

	// Streams completed vs incomplete.
	c = newChart(tl, ps, max(slices.Max(completed), slices.Max(incomplete)), "/s", "streams per second")
	c.frame(plotH)
	c.yAxis()
	c.lines([]series{{id: "streams/completed", label: "completed", color: lineColors[2], values: completed},
		{id: "streams/incomplete", label: "incomplete", color: lineColors[3], values: incomplete}}, false)
	charts = append(charts, c.svg("Streams ending per second: completed, incomplete after their first chunk", plotH))

	summaryLines := []string{
		fmt.Sprintf("%d requests, %.2f%% answered (any source); p50 %v, p99 %v; deadline %v", s.requests, 100*s.successRate(), round(s.p50), round(s.p99), s.cfg.Deadline),
		fmt.Sprintf("%d streams: %d completed, %d incomplete after their first chunk", s.streams.streams, s.streams.byEnd[streamComplete], s.streams.byEnd[streamIncomplete]),
		fmt.Sprintf("buckets of %v; shaded: %s", tl.bin, phaseList(ps)),
	}
	if bd != nil {
		charts = append(charts, bd.chart())
		answered := bd.requests - bd.byKind["error"]
		summaryLines = append(summaryLines, fmt.Sprintf("then both models down for %v: %d requests, %.1f%% answered by the cache and the default, %d upstream calls",
			bd.duration, bd.requests, share(answered, bd.requests), bd.upstream))
	}

	data := reportData{
		Title:   "tierguard outage demo",
		Summary: summaryLines,
		Charts:  charts,
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, data); err != nil {
		return err
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// chart draws the last act: answers per second by how they came (the
// cache's kinds of match, the default, a tier, no answer), stacked, while
// both models answer 503.
func (bd *bothDownSummary) chart() template.HTML {
	tl := newTimeline(bd.duration)
	perSec := 1 / tl.bin.Seconds()
	byKind := make([][]float64, len(kinds))
	for i := range byKind {
		byKind[i] = make([]float64, tl.n)
	}
	for _, a := range bd.answers {
		if a.kind >= 0 {
			byKind[a.kind][tl.at(a.at)] += perSec
		}
	}
	peak := 0.0
	for b := range tl.n {
		sum := 0.0
		for k := range kinds {
			sum += byKind[k][b]
		}
		peak = max(peak, sum)
	}
	var stack []series
	for k, name := range kinds {
		if slices.Max(byKind[k]) == 0 && (name == "tier" || name == "error") {
			continue
		}
		stack = append(stack, series{id: "bothdown/" + name, label: name, color: kindColors[name], values: byKind[k]})
	}
	c := newChart(tl, []phase{{label: "pro and flash down (503)", from: 0, to: bd.duration}}, peak, "/s", "answers per second")
	c.xTitle = "time since both models went down"
	c.frame(plotH)
	c.yAxis()
	c.stacked(stack)
	return c.svg("Both models down: answers per second, by how the cache matched (exact, template, semantic, simplified) or the default", plotH)
}

func phaseList(ps []phase) string {
	var out []string
	for _, p := range ps {
		if p.label != "healthy" {
			out = append(out, fmt.Sprintf("%s %s–%s", p.label, fmtSeconds(p.from), fmtSeconds(p.to)))
		}
	}
	if len(out) == 0 {
		return "no fault"
	}
	return strings.Join(out, ", ")
}

var reportTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Title}}</title>
<style>
body { font-family: system-ui, sans-serif; margin: 24px; color: #1a202c; background: #fff; }
h1 { font-size: 20px; margin: 0 0 8px; }
p { margin: 2px 0; font-size: 13px; color: #4a5568; }
figure { margin: 18px 0 0; }
figcaption { font-size: 14px; font-weight: 600; margin-bottom: 4px; }
svg { display: block; width: 100%; height: auto; }
</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{range .Summary}}<p>{{.}}</p>
{{end}}{{range .Charts}}{{.}}
{{end}}<script>
var ids = new Set(Array.from(document.querySelectorAll("[data-series]"), function (e) { return e.dataset.series; }));
document.body.dataset.series = Array.from(ids).sort().join(" ");
document.body.dataset.rendered = "true";
</script>
</body>
</html>
`))
