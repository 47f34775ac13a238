package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/catalog"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// buildStreamChain assembles the streaming chain: pro → flash → default,
// each tier a gemrest stream over :streamGenerateContent?alt=sse.
//
// A stream falls back across tiers only until its first chunk (the commit
// point): after it the client has shown text, and a failure ends the
// stream as incomplete instead of splicing another model's answer on.
// The stages share the unary chain's circuit breakers — one per model,
// whichever endpoint finds it failing — so an outage that opened pro's
// breaker sends streams straight to flash too.
func buildStreamChain(cfg config, srv *fakegemini.Server, models *catalog.Catalog, g *guards) (*fallback.StreamChain[question, gemrest.Chunk], error) {
	type tierSpec struct {
		name, model string
		prompt      func(question) gemrest.Request
		minAttempt  time.Duration // the least time worth starting the tier with
	}
	specs := []tierSpec{
		{name: "pro", model: proModel, prompt: func(q question) gemrest.Request {
			return gemrest.Request{System: "Answer in JSON.", Prompt: q.Text, JSON: true}
		}},
		// pro's wait for a first chunk stops this much before the deadline,
		// so that flash still has time to stream a whole answer.
		{name: "flash", model: flashModel, minAttempt: cfg.Deadline / 4, prompt: func(q question) gemrest.Request {
			return gemrest.Request{Prompt: "Briefly, in JSON: " + q.Text, JSON: true, MaxOutputTokens: 256}
		}},
	}
	var stages []fallback.StreamStage[question, gemrest.Chunk]
	for _, s := range specs {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), APIKey: "demo-key", Model: s.model, Name: s.name, HTTPClient: srv.Client()})
		if err != nil {
			return nil, err
		}
		budget, err := retry.NewBudget(10, 0.1)
		if err != nil {
			return nil, err
		}
		stages = append(stages, fallback.StreamStage[question, gemrest.Chunk]{
			Tier:     gemrest.NewTier(c, s.prompt),
			Model:    s.model,
			Provider: "gcp.gemini",
			Breaker:  g.breaker(s.name),
			// Retries happen only before the first chunk.
			Retry:             retry.Policy{MaxAttempts: 2, BaseDelay: 50 * time.Millisecond, MaxDelay: 250 * time.Millisecond, Budget: budget},
			FirstChunkTimeout: cfg.FirstChunk,
			IdleTimeout:       cfg.Idle,
			MinAttempt:        s.minAttempt,
			// The assembled answer is checked when the stream ends; a
			// malformed one ends the stream with a validation error, after
			// the chunks already shown.
			Validate: validAnswer,
		})
	}
	// The operation is the unary chain's, generate_content, as the GenAI
	// conventions name it: otelx marks the attempts gen_ai.request.stream.
	return fallback.NewStream(fallback.StreamConfig[question, gemrest.Chunk]{
		Stages:  stages,
		Total:   cfg.Deadline, // bounds the whole stream, not just its start
		Catalog: models,
		// When no tier could start a stream: one canned chunk.
		Default: func(context.Context, question) (gemrest.Chunk, bool) {
			return gemrest.Chunk{Text: `{"model":"default","answer":"We are busy right now; please try again shortly."}`, FinishReason: "STOP"}, true
		},
	})
}

// streamClient streams one answer after another until the run's duration
// ends, reading every chunk as a chat UI would show it.
func streamClient(ctx context.Context, cfg config, chain *fallback.StreamChain[question, gemrest.Chunk], rec *recorder, id int) {
	rng := rand.New(rand.NewPCG(cfg.Seed, uint64(id)+1000))
	var t tally
	defer rec.merge(&t)
	for ctx.Err() == nil && time.Since(rec.t0) < cfg.Duration {
		q := rng.IntN(numQuestions)
		in := question{ID: q, Text: fmt.Sprintf("Question %d: tell me about topic %d, step by step.", q, q)}
		start := time.Now()
		s := chain.Stream(context.Background(), in)
		var err error
		for _, cerr := range s.Chunks() {
			// A real client would show the chunk's text here, and on an
			// error after some chunks mark what it showed as cut short.
			err = cerr
		}
		rec.recordStream(&t, start, time.Now(), s.Result(), err)
		if cfg.Think > 0 {
			pause := time.Duration(rng.Int64N(int64(2 * cfg.Think)))
			select {
			case <-time.After(pause):
			case <-ctx.Done():
			}
		}
	}
}

// streamSources are where a stream can come from, in report order.
var streamSources = []string{"pro", "flash", "default", "error"}

// streamEnd says how a stream ended.
type streamEnd uint8

const (
	// streamComplete: a finish reason, and the validator accepted the text.
	streamComplete streamEnd = iota
	// streamIncomplete: it broke after its first chunk (an
	// *fallback.IncompleteError).
	streamIncomplete
	// streamInvalid: it finished, but the validator rejected the text.
	streamInvalid
	// streamFailed: no tier started a stream, and no default answered.
	streamFailed
	numStreamEnds
)

// streamRecord is one stream's outcome.
type streamRecord struct {
	start    time.Duration // since t0
	overrun  time.Duration // end past the deadline; ≤ 0 when on time
	ttfc     time.Duration // time to first chunk; 0 unless a tier streamed
	source   int           // index into streamSources
	end      streamEnd
	cause    string // why an incomplete stream broke
	fellBack bool   // answered by a later tier or the default
	calls    [numTiers]uint16
}

// recordStream files one stream's result in the client's tally.
func (r *recorder) recordStream(t *tally, start, end time.Time, res fallback.StreamResult, err error) {
	rec := streamRecord{start: start.Sub(r.t0), overrun: end.Sub(start.Add(r.cfg.Deadline)), fellBack: res.Degraded}
	switch {
	case err != nil && res.Chunks == 0:
		rec.source = slices.Index(streamSources, "error")
	case res.Source == fallback.SourceDefault:
		rec.source = slices.Index(streamSources, "default")
	default:
		rec.source = max(slices.Index(streamSources, res.Tier), 0)
		rec.ttfc = res.TimeToFirstChunk
	}
	var ie *fallback.IncompleteError
	switch {
	case err == nil:
		rec.end = streamComplete
	case errors.As(err, &ie):
		rec.end, rec.cause = streamIncomplete, incompleteCause(ie)
	case res.Chunks > 0:
		rec.end = streamInvalid
	default:
		rec.end = streamFailed
	}
	for _, a := range res.Attempts() {
		if a.Skip != fallback.NotSkipped {
			continue
		}
		bump(&t.streamCalls, a.Tier)
		if i := tierIndex(a.Tier); i >= 0 {
			rec.calls[i]++
		}
		if errors.Is(a.Err, fallback.ErrFirstChunkTimeout) {
			bump(&t.firstChunkTimeouts, a.Tier)
		}
	}
	t.streams = append(t.streams, rec)
}

// incompleteCause names why a stream broke after its first chunk.
func incompleteCause(ie *fallback.IncompleteError) string {
	switch {
	case errors.Is(ie, io.ErrUnexpectedEOF):
		return "connection cut"
	case errors.Is(ie, fallback.ErrNoFinishReason):
		return "no finish reason"
	case errors.Is(ie, fallback.ErrIdleTimeout):
		return "idle timeout"
	case ie.V.Class == classify.DeadlineExhausted:
		return "deadline"
	}
	return ie.V.Class.String()
}

// streamSummary is the streams' part of the summary.
type streamSummary struct {
	streams            int
	bySource           []int
	byEnd              [numStreamEnds]int
	causes             map[string]int
	fellBack           int
	ttfcP50, ttfcP95   time.Duration
	overrun            time.Duration // worst, 0 when none was late
	firstChunkTimeouts map[string]int
}

func summarizeStreams(m *tally) streamSummary {
	s := streamSummary{streams: len(m.streams), bySource: make([]int, len(streamSources)), causes: map[string]int{},
		firstChunkTimeouts: m.firstChunkTimeouts}
	var ttfc []time.Duration
	for _, rec := range m.streams {
		s.bySource[rec.source]++
		s.byEnd[rec.end]++
		if rec.end == streamIncomplete {
			s.causes[rec.cause]++
		}
		if rec.fellBack {
			s.fellBack++
		}
		if rec.ttfc > 0 {
			ttfc = append(ttfc, rec.ttfc)
		}
		s.overrun = max(s.overrun, rec.overrun)
	}
	slices.Sort(ttfc)
	s.ttfcP50, s.ttfcP95 = quantile(ttfc, 0.50), quantile(ttfc, 0.95)
	return s
}

// print writes the streams' section of the report.
func (s *streamSummary) print(w io.Writer, c config) {
	fmt.Fprintf(w, "\nstreams: %d clients, pro → flash → default, first chunk ≤ %v, gaps ≤ %v, deadline %v\n",
		c.StreamClients, c.FirstChunk, c.Idle, c.Deadline)
	row := func(label string, n int, extra string) {
		fmt.Fprintf(w, "  %-37s %6d  %5.1f%%%s\n", label, n, pct(n, s.streams), extra)
	}
	fmt.Fprintf(w, "  %-37s %6d\n", "streams", s.streams)
	row("completed", s.byEnd[streamComplete], "")
	var causes []string
	for _, k := range slices.Sorted(maps.Keys(s.causes)) {
		causes = append(causes, fmt.Sprintf("%s %d", k, s.causes[k]))
	}
	extra := ""
	if len(causes) > 0 {
		extra = "   (" + strings.Join(causes, ", ") + ")"
	}
	row("incomplete after the first chunk", s.byEnd[streamIncomplete], extra)
	row("rejected by the validator at the end", s.byEnd[streamInvalid], "")
	row("failed before any chunk", s.byEnd[streamFailed], "")
	row("fell back before the first chunk", s.fellBack, fmt.Sprintf("   (flash %d, default %d)",
		s.bySource[slices.Index(streamSources, "flash")], s.bySource[slices.Index(streamSources, "default")]))
	if n := s.firstChunkTimeouts["pro"] + s.firstChunkTimeouts["flash"]; n > 0 {
		fmt.Fprintf(w, "  %-37s %6d\n", "attempts with no first chunk in time", n)
	}
	fmt.Fprintf(w, "  %-37s p50 %v   p95 %v   (streams from a tier)\n", "time to first chunk", round(s.ttfcP50), round(s.ttfcP95))
	fmt.Fprintf(w, "  %-37s %v past the deadline   (invariant ≤ %v: %s)\n", "worst overrun", round(max(s.overrun, 0)), c.Slack, okOrBroken(s.overrun <= c.Slack))
}
