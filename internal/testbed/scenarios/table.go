package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"
)

// sample is one run of one variant: its measurements by column key.
type sample map[string]float64

// column is one column of a scenario's table.
type column struct {
	key    string
	header string
	format func(float64) string
}

func countCol(key, header string) column { return column{key, header, fmtCount} }
func msCol(key, header string) column    { return column{key, header, fmtMs} }
func secCol(key, header string) column   { return column{key, header, fmtSec} }
func pctCol(key, header string) column   { return column{key, header, fmtPct} }
func ratioCol(key, header string) column { return column{key, header, fmtRatio} }
func fmtCount(v float64) string          { return strconv.FormatFloat(v, 'f', -1, 64) }
func fmtSec(v float64) string            { return strconv.FormatFloat(v, 'f', 2, 64) + " s" }
func fmtPct(v float64) string            { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" }
func fmtRatio(v float64) string          { return strconv.FormatFloat(v, 'f', 3, 64) }
func seconds(d time.Duration) float64    { return d.Seconds() }
func millis(d time.Duration) float64     { return float64(d) / float64(time.Millisecond) }
func fmtMs(v float64) string {
	if math.Abs(v) >= 100 {
		return strconv.FormatFloat(v, 'f', 0, 64) + " ms"
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " ms"
}

// row is one variant of a scenario, with every run's sample.
type row struct {
	name string
	runs []sample
}

// stat summarises one column of a row over its runs.
type stat struct {
	median, min, max float64
	n                int
}

func (r *row) stat(key string) (stat, bool) {
	var vs []float64
	for _, s := range r.runs {
		if v, ok := s[key]; ok && !math.IsNaN(v) {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return stat{}, false
	}
	slices.Sort(vs)
	m := vs[len(vs)/2]
	if len(vs)%2 == 0 {
		m = (vs[len(vs)/2-1] + vs[len(vs)/2]) / 2
	}
	return stat{median: m, min: vs[0], max: vs[len(vs)-1], n: len(vs)}, true
}

// median returns the row's median for key, NaN when it was not measured.
func (r *row) median(key string) float64 {
	s, ok := r.stat(key)
	if !ok {
		return math.NaN()
	}
	return s.median
}

// minOf returns the smallest value of key over the runs (the worst run of a
// rate that must stay high), NaN when it was not measured.
func (r *row) minOf(key string) float64 {
	s, ok := r.stat(key)
	if !ok {
		return math.NaN()
	}
	return s.min
}

// maxOf returns the largest value of key over the runs, NaN when it was not
// measured.
func (r *row) maxOf(key string) float64 {
	s, ok := r.stat(key)
	if !ok {
		return math.NaN()
	}
	return s.max
}

// paired returns the median, over runs, of a's value for key divided by
// b's in the same run. Both rows ran once per seed, in the same order and
// the same process, so a run's ratio compares two strategies under the
// same faults and the same machine noise; the median of the ratios, unlike
// the ratio of the medians, does not mix runs that landed in different
// buckets of a wall clock. NaN when no run has both.
func paired(a, b *row, key string) float64 {
	var rs []float64
	for i := range min(len(a.runs), len(b.runs)) {
		x, okx := a.runs[i][key]
		y, oky := b.runs[i][key]
		if okx && oky && !math.IsNaN(x) && !math.IsNaN(y) && y != 0 {
			rs = append(rs, x/y)
		}
	}
	if len(rs) == 0 {
		return math.NaN()
	}
	slices.Sort(rs)
	if len(rs)%2 == 0 {
		return (rs[len(rs)/2-1] + rs[len(rs)/2]) / 2
	}
	return rs[len(rs)/2]
}

// check is a target of the issue, judged on the medians (or, for hard
// invariants, on every run).
type check struct {
	what string
	ok   bool
	got  string
}

// result is a scenario's table.
type result struct {
	id      int
	title   string
	columns []column
	rows    []*row
	checks  []check
	notes   []string
}

func (res *result) row(name string) *row {
	for _, r := range res.rows {
		if r.name == name {
			return r
		}
	}
	r := &row{name: name}
	res.rows = append(res.rows, r)
	return r
}

func (res *result) find(name string) *row {
	for _, r := range res.rows {
		if r.name == name {
			return r
		}
	}
	return nil
}

func (res *result) expect(what string, ok bool, got string) {
	res.checks = append(res.checks, check{what: what, ok: ok, got: got})
}

// failed lists the checks that failed.
func (res *result) failed() []check {
	var out []check
	for _, c := range res.checks {
		if !c.ok {
			out = append(out, c)
		}
	}
	return out
}

func cell(c column, s stat) string {
	if s.n <= 1 || s.min == s.max {
		return c.format(s.median)
	}
	return c.format(s.median) + " (" + c.format(s.min) + ".." + c.format(s.max) + ")"
}

// print writes the scenario as a Markdown table: the median over the runs,
// then the range in parentheses when the runs differed.
func (res *result) print(w io.Writer, runs int) {
	fmt.Fprintf(w, "\n### Scenario %d: %s\n\n", res.id, res.title)
	if runs > 1 {
		fmt.Fprintf(w, "Median of %d runs (min..max in parentheses when runs differed).\n\n", runs)
	}
	head := []string{"variant"}
	for _, c := range res.columns {
		head = append(head, c.header)
	}
	cells := [][]string{head}
	for _, r := range res.rows {
		line := []string{r.name}
		for _, c := range res.columns {
			if s, ok := r.stat(c.key); ok {
				line = append(line, cell(c, s))
			} else {
				line = append(line, "–")
			}
		}
		cells = append(cells, line)
	}
	widths := make([]int, len(head))
	for _, line := range cells {
		for i, s := range line {
			widths[i] = max(widths[i], len([]rune(s)))
		}
	}
	for i, line := range cells {
		var b strings.Builder
		b.WriteString("|")
		for j, s := range line {
			pad := widths[j] - len([]rune(s))
			if j == 0 {
				b.WriteString(" " + s + strings.Repeat(" ", pad) + " |")
			} else {
				b.WriteString(" " + strings.Repeat(" ", pad) + s + " |")
			}
		}
		fmt.Fprintln(w, b.String())
		if i == 0 {
			b.Reset()
			b.WriteString("|")
			for j := range line {
				if j == 0 {
					b.WriteString(" " + strings.Repeat("-", widths[j]) + " |")
				} else {
					b.WriteString(" " + strings.Repeat("-", widths[j]-1) + ": |")
				}
			}
			fmt.Fprintln(w, b.String())
		}
	}
	for _, n := range res.notes {
		fmt.Fprintf(w, "\n%s\n", n)
	}
	if len(res.checks) > 0 {
		fmt.Fprintln(w)
		for _, c := range res.checks {
			mark := "MET "
			if !c.ok {
				mark = "MISS"
			}
			fmt.Fprintf(w, "- [%s] %s — %s\n", mark, c.what, c.got)
		}
	}
}

// percentile returns the p-quantile (0..1) of ds by the nearest-rank
// method, 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	k := int(math.Ceil(p*float64(len(s)))) - 1
	return s[min(max(k, 0), len(s)-1)]
}
