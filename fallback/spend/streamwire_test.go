package spend_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/cache"
	"github.com/tierguard/tierguard/fallback/chaos"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/otelx"
	"github.com/tierguard/tierguard/retry"
)

// piece is a chunk of the fake provider's streams.
type piece struct {
	text   string
	finish string
}

func inspectPiece(p piece) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: p.text, FinishReason: p.finish}
}

// streamModel is one deployment of a model at the fake provider, streaming.
// A stream is billed, and then reported, when the provider sends its
// usage: with its last chunk, or, for one cut short, with what it sent.
// What a stream does depends on the input's kind:
//
//	ok        streams three chunks at once
//	retry     fails with a 503 before its content (unbilled) on its first
//	          stream, then streams
//	slow      its first stream's content after 300 ms, or it stops when
//	          cancelled (unbilled); the hedge on the other key answers at
//	          once and wins
//	stubborn  its first content after 300 ms even when cancelled (billed:
//	          a hedge loser the provider finished)
//	stuck     ignores its context for a second (billed: abandoned)
//	cut       two chunks, billed, then a cut connection: incomplete
//	cancel    like slow; the caller cancels at 30 ms
//	limited   its first stream gets a 429 with a 100 ms Retry-After
//	          (unbilled): the pool rotates to the other key
//	leave     the consumer stops after the first chunk (unbilled)
type streamModel struct {
	p       *provider
	model   string
	primary bool
}

func (m *streamModel) tier(name string) fallback.StreamTier[string, piece] {
	return fallback.StreamTierFunc(name, m.stream, inspectPiece)
}

func (m *streamModel) stream(ctx context.Context, in string) iter.Seq2[piece, error] {
	return func(yield func(piece, error) bool) {
		m.p.calls.Add(1)
		kind, _, _ := strings.Cut(in, ":")
		v, _ := m.p.tried.LoadOrStore(m.model+"/"+in, new(atomic.Int64))
		n := int(v.(*atomic.Int64).Add(1))
		answer := fallback.Usage{InputTokens: 100 + int64(len(in)), OutputTokens: 10 + int64(n)}
		wait := func(d time.Duration) bool {
			select {
			case <-time.After(d):
				return true
			case <-ctx.Done():
				yield(piece{}, ctx.Err())
				return false
			}
		}
		if m.primary {
			switch kind {
			case "retry":
				if n == 1 {
					yield(piece{}, classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503, Reason: "scripted"}))
					return
				}
			case "slow":
				// Only the first stream: the hedge on the other key wins.
				if n == 1 && !wait(300*time.Millisecond) {
					return
				}
			case "cancel":
				if !wait(300 * time.Millisecond) {
					return
				}
			case "stubborn":
				time.Sleep(300 * time.Millisecond)
			case "stuck":
				time.Sleep(time.Second)
			case "cut":
				for _, t := range []string{"a", "b"} {
					if !yield(piece{text: t}, nil) {
						return
					}
				}
				m.p.bill(ctx, m.model, fallback.Usage{InputTokens: answer.InputTokens, OutputTokens: 2})
				yield(piece{}, io.ErrUnexpectedEOF)
				return
			case "limited":
				if n == 1 {
					yield(piece{}, classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: 100 * time.Millisecond, Reason: "scripted"}))
					return
				}
			}
		}
		if !yield(piece{text: " "}, nil) {
			return
		}
		for _, t := range []string{"x", "y"} {
			if !yield(piece{text: t}, nil) {
				return
			}
		}
		// The usage comes with the last chunk, billed as it is sent.
		m.p.bill(ctx, m.model, answer)
		yield(piece{text: "z", finish: "STOP"}, nil)
	}
}

// wrapping is how the stream chain's first tier, a pool of two keys, is
// put together.
type wrapping struct {
	name string
	// limited is set when a rate limit wraps the pool or its members: a
	// 429 slows it down for every request after, so that requests end
	// differently from an unlimited run's.
	limited bool
	wrap    func(t fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece]
	// members wraps each member's tier.
	members func(t fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece]
}

func newLimiter(t *testing.T, name string) *ratelimit.Limiter {
	l, err := ratelimit.New(ratelimit.Config{Name: name, Requests: 1 << 20, Per: time.Second})
	require.NoError(t, err)
	return l
}

func wrappings(t *testing.T) []wrapping {
	var sw chaos.Switch
	return []wrapping{
		{name: "pool"},
		{name: "chaos(pool)", wrap: func(p fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece] {
			return chaos.StreamTier(p, &sw)
		}},
		{name: "ratelimit(pool)", limited: true, wrap: func(p fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece] {
			return ratelimit.StreamTier(p, ratelimit.TierConfig[string]{Limiter: newLimiter(t, "pro")})
		}},
		{name: "map(pool)", wrap: func(p fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece] {
			return fallback.MapStreamTier(p, func(c piece) piece { return c }, inspectPiece)
		}},
		{name: "pool(chaos(member))", members: func(m fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece] {
			return chaos.StreamTier(m, &sw)
		}},
		{name: "pool(ratelimit(member))", limited: true, members: func(m fallback.StreamTier[string, piece]) fallback.StreamTier[string, piece] {
			return ratelimit.StreamTier(m, ratelimit.TierConfig[string]{Limiter: newLimiter(t, m.Name())})
		}},
	}
}

// streamWireChain is pro, a pool of two keys hedged on each other, then
// flash, then a cache and a default answer, with AbandonAfter.
func streamWireChain(t *testing.T, p *provider, w wrapping, c *cache.Cache[string, string]) *fallback.StreamChain[string, piece] {
	t.Helper()
	member := func(name string) fallback.StreamTier[string, piece] {
		m := (&streamModel{p: p, model: "pro", primary: true}).tier(name)
		if w.members != nil {
			m = w.members(m)
		}
		return m
	}
	// A 429 moves a stream to the other key and cools neither: how many
	// 429s land together would otherwise decide which requests find both
	// keys cooling, and the runs could not be compared.
	off := &fallback.CoolDown{Off: true}
	keys, err := pool.NewStream(pool.StreamConfig[string, piece]{Name: "pro", Members: []pool.StreamMember[string, piece]{
		{Key: "key-1", Tier: member("pro-1"), CoolDown: off}, {Key: "key-2", Tier: member("pro-2"), CoolDown: off},
	}})
	require.NoError(t, err)
	var pro fallback.StreamTier[string, piece] = keys
	if w.wrap != nil {
		pro = w.wrap(pro)
	}
	chain, err := fallback.NewStream(fallback.StreamConfig[string, piece]{
		Stages: []fallback.StreamStage[string, piece]{
			{Tier: pro, Model: "pro", FirstChunkTimeout: 200 * time.Millisecond,
				Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond, MaxDelay: time.Millisecond},
				Hedge: fallback.Hedge{Delay: 50 * time.Millisecond, MaxExtra: 1}},
			{Tier: (&streamModel{p: p, model: "flash"}).tier("flash"), Model: "flash"},
		},
		Total:        2 * time.Second,
		AbandonAfter: 20 * time.Millisecond,
		Cache:        cache.ForStream(c, func(s string) piece { return piece{text: s, finish: "STOP"} }, cache.Text),
		Default:      func(context.Context, string) (piece, bool) { return piece{text: "default", finish: "STOP"}, true },
	})
	require.NoError(t, err)
	return chain
}

// sumOf is the sum of an int64 counter's points.
func sumOf(t *testing.T, reader *sdkmetric.ManualReader, name string) int64 {
	var rm metricdata.ResourceMetrics
	require.NoError(t, reader.Collect(context.Background(), &rm))
	var n int64
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if s, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == name {
				for _, p := range s.DataPoints {
					n += p.Value
				}
			}
		}
	}
	return n
}

// Billing at the wire, streaming: over a mixed run at 64 concurrent
// streams — plain streams, retries before content, a pool that rotates on
// a 429 before content, first chunks hedged on the other key, hedge losers
// the provider finished, streams abandoned and billed late, streams cut
// after their content, callers that cancel or stop reading — the ledger's
// tokens, cost and calls equal the provider's own count exactly, and so
// does otelx's count of attempts, however the pool is wrapped (chaos, a
// rate limit, a mapping, around it or around its members); every request
// is counted once, and each kind of request ends the same way whatever
// the wrapping.
func TestStreamLedgerMatchesTheProvider(t *testing.T) {
	kinds := []string{"ok", "retry", "slow", "stubborn", "stuck", "cut", "cancel", "limited", "leave"}
	var outcomes []map[string]int
	for _, w := range wrappings(t) {
		t.Run(w.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := &provider{prices: testPrices(t)}
				l := newLedger(t, spend.Config{Prices: p.prices})
				answers, err := cache.New(cache.Config[string, string]{Prompt: func(q string) string { return q }})
				require.NoError(t, err)
				defer answers.Close()
				c := streamWireChain(t, p, w, answers)
				_, err = l.Attach(c)
				require.NoError(t, err)
				reader := sdkmetric.NewManualReader()
				mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
				inst, err := otelx.Instrument(c, otelx.Options{MeterProvider: mp})
				require.NoError(t, err)
				defer inst.Close()

				const callers, each = 64, 9
				var mu sync.Mutex
				ends := map[string]int{}
				var answered, failed, refused atomic.Int64
				var wins atomic.Int64
				var wg sync.WaitGroup
				for g := range callers {
					wg.Go(func() {
						for i := range each {
							kind := kinds[(g+i)%len(kinds)]
							tk, err := l.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{})
							require.NoError(t, err)
							ctx, cancel := context.WithCancel(tk)
							if kind == "cancel" {
								time.AfterFunc(30*time.Millisecond, cancel)
							}
							s := c.Stream(ctx, fmt.Sprintf("%s:%d-%d", kind, g, i))
							var serr error
							for ch, err := range s.Chunks() {
								if serr = err; err != nil || kind == "leave" && ch.text == " " {
									break
								}
							}
							cancel()
							tk.End()
							res := s.Result()
							for _, a := range res.Attempts() {
								if a.Hedge && a.Verdict.Class == classify.OK && kind == "slow" {
									wins.Add(1)
								}
								var se *fallback.SkipError
								if a.Skip == fallback.NotSkipped && errors.As(a.Err, &se) {
									// A member's own rate limit refused the
									// call a rotation had started: an attempt
									// on the trail, told to observers, with no
									// upstream call (see pool's doc).
									refused.Add(1)
								}
							}
							end := fmt.Sprintf("%s complete=%v source=%v", kind, res.Complete, res.Source)
							if serr != nil {
								failed.Add(1)
								end += " failed"
							} else {
								answered.Add(1)
							}
							mu.Lock()
							ends[end]++
							mu.Unlock()
						}
					})
				}
				wg.Wait()
				// Let the stuck and stubborn streams finish and report.
				time.Sleep(5 * time.Second)
				synctest.Wait()
				require.Zero(t, c.Stats().Stuck)

				usage, cost, sent := p.books()
				tot := l.Totals("acme")
				assert.Equal(t, usage.InputTokens, tot.Usage.InputTokens, "input tokens")
				assert.Equal(t, usage.OutputTokens, tot.Usage.OutputTokens, "output tokens")
				assert.Equal(t, cost, tot.Cost, "cost")
				assert.Equal(t, p.calls.Load()+refused.Load(), tot.Calls, "calls: the provider's own count, and the refusals after a rotation")
				assert.Equal(t, p.calls.Load()+refused.Load(), sumOf(t, reader, "tierguard.attempts"), "otelx's attempts: the provider's own count")
				if w.members == nil || !w.limited {
					assert.Zero(t, refused.Load())
				}
				assert.Positive(t, sent)
				assert.Equal(t, int64(callers*each), tot.Requests, "every request once")
				assert.Equal(t, int64(callers*each), sumOf(t, reader, "tierguard.requests"))
				assert.Positive(t, failed.Load(), "the cut streams and the cancelled callers")
				// A slow first stream loses to its hedge on the other key,
				// when the hedge budget (shared with the stubborn, stuck
				// and cancelled streams' hedges) has one for it in time;
				// otherwise its retry answers.
				if !w.limited {
					// A limited pool is mostly skipped once a 429 throttled it.
					assert.Positive(t, wins.Load(), "hedges won")
				}
				assert.Equal(t, 64, ends["slow complete=true source=tier"], "every slow request answered")
				assert.Zero(t, l.Untracked())
				if !w.limited {
					outcomes = append(outcomes, ends)
				}
			})
		})
	}
	for i := 1; i < len(outcomes); i++ {
		assert.Equal(t, outcomes[0], outcomes[i], "each kind of request ends the same way, however an unlimited pool is wrapped")
	}
}
