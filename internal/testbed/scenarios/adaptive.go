package main

import (
	"fmt"
	"strings"

	"github.com/tierguard/tierguard/bulkhead"
	"github.com/tierguard/tierguard/internal/testbed/adaptsim"
)

// ---------------------------------------------------------------------------
// Scenario 16: a provider's capacity drops from 64 to 24 and recovers,
// under 48 clients of three priorities: fixed bulkheads against the
// adaptive one (see package adaptsim; benchcmp's TestAdaptiveScenario runs
// the same beside failsafe-go's adaptive limiter, which this module cannot
// import).

func scenarioAdaptive(runs int, seed uint64) *result {
	c := adaptsim.Default()
	res := &result{id: 16, title: fmt.Sprintf("adaptive concurrency: capacity %d → %d → %d, %d clients (interactive %d, batch %d, free %d), time ×%g, figures in model time",
		c.High, c.Low, c.High, c.Interactive+c.Batch+c.Free, c.Interactive, c.Batch, c.Free, c.Scale)}
	res.columns = []column{
		ratioCol("goodput", "goodput/s"), countCol("503", "upstream 503s"),
		countCol("refI", "refused interactive"), countCol("refB", "refused batch"), countCol("refF", "refused free"),
		secCol("p99IH", "p99 interactive healthy"), secCol("p99ID", "p99 interactive in the drop"),
		secCol("convDrop", "limit within 20% after drop"), secCol("convRec", "after recovery"),
	}
	I, B, F := bulkhead.Interactive, bulkhead.Batch, bulkhead.Sheddable
	conv := func(r adaptsim.Report) (float64, float64) {
		d, rec := r.ConvergeDrop.Seconds(), r.ConvergeRecover.Seconds()
		if r.ConvergeDrop < 0 {
			d = c.Drop.Seconds()
		}
		if r.ConvergeRecover < 0 {
			rec = c.Recovered.Seconds()
		}
		return d, rec
	}
	var ordered []bool
	for run := range runs {
		for _, v := range adaptsim.Contenders(c) {
			r := adaptsim.Run(c, v.Name, v.New(), seed+uint64(run))
			d, rec := conv(r)
			res.row(v.Name).runs = append(res.row(v.Name).runs, sample{
				"goodput": r.Goodput, "503": float64(r.Upstream503),
				"refI": float64(r.Refused[I]), "refB": float64(r.Refused[B]), "refF": float64(r.Refused[F]),
				"p99IH": r.P99Healthy[I].Seconds(), "p99ID": r.P99Drop[I].Seconds(), "convDrop": d, "convRec": rec,
			})
			if v.Name == adaptsim.TierguardAdaptive {
				ordered = append(ordered, r.LowFirstShed >= 0 && (r.InteractiveFirstRefusal < 0 || r.InteractiveFirstRefusal > r.LowFirstShed))
			}
		}
	}
	a := res.find(adaptsim.TierguardAdaptive)
	best, bestName := 0.0, ""
	for _, r := range res.rows {
		if strings.HasPrefix(r.name, "static") && r.median("goodput") > best {
			best, bestName = r.median("goodput"), r.name
		}
	}
	res.expect("goodput ≥ the best static size's ("+bestName+")", a.median("goodput") >= best, fmt.Sprintf("%.1f vs %.1f", a.median("goodput"), best))
	ratio := a.median("p99ID") / a.median("p99IH")
	res.expect("interactive p99 in the drop ≤ 1.2× its healthy p99", ratio <= 1.2, fmt.Sprintf("%.2f×", ratio))
	all := true
	for _, o := range ordered {
		all = all && o
	}
	res.expect("batch and free refused before any interactive call, every run", all, fmt.Sprint(ordered))
	res.expect("limit within 20% of the capacity ≤ 5 s after the drop", a.median("convDrop") <= 5, fmtSec(a.median("convDrop")))
	res.expect("limit within 20% of the capacity ≤ 5 s after the recovery", a.median("convRec") <= 5, fmtSec(a.median("convRec")))
	res.notes = append(res.notes,
		"A refused or failed call falls to a fallback that takes 0.3 s and its client comes back; goodput counts the provider's answers only.",
		"\"never\" converging counts as the whole phase. failsafe-go's adaptive limiter runs beside these in benchcmp's TestAdaptiveScenario.",
		"The oracle is a mark, not a contender: it knows the capacity at every instant and admits 0.9 of it, where the provider answers most per second; no limiter that learns from calls can pass it.")
	return res
}
