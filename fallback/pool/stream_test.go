package pool_test

import (
	"context"
	"errors"
	"iter"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/pool"
	"github.com/tierguard/tierguard/internal/testbed/reported"
	"github.com/tierguard/tierguard/retry"
)

// chunk is a streamed piece of an answer; from names the fake member
// that sent it, for the tests' eyes only.
type chunk struct {
	text, finish, from string
}

func inspect(c chunk) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish}
}

// piece is one step of a fake member's stream: a chunk, or an error
// that ends it, after wait.
type piece struct {
	c    chunk
	err  error
	wait time.Duration
}

// member is a fake member's streaming tier: script says what its n-th
// stream sends. It counts its streams and the chunks its consumer took.
type member struct {
	name   string
	script func(n int64) []piece
	calls  atomic.Int64
	taken  atomic.Int64
}

func (m *member) tier() fallback.StreamTier[string, chunk] {
	return fallback.StreamTierFunc("pro", func(ctx context.Context, _ string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			for _, p := range m.script(m.calls.Add(1)) {
				if p.wait > 0 {
					t := time.NewTimer(p.wait)
					select {
					case <-ctx.Done():
						t.Stop()
						yield(chunk{}, ctx.Err())
						return
					case <-t.C:
					}
				}
				p.c.from = m.name
				if !yield(p.c, p.err) || p.err != nil {
					return
				}
				m.taken.Add(1)
			}
		}
	}, inspect)
}

// answer is a whole stream: a role chunk without content, the texts, the
// last with its finish reason.
func answer(texts ...string) []piece {
	out := []piece{{}}
	for i, s := range texts {
		p := piece{c: chunk{text: s}}
		if i == len(texts)-1 {
			p.c.finish = "STOP"
		}
		out = append(out, p)
	}
	return out
}

// failing is a stream that sends a role chunk and texts, then fails with err.
func failing(err error, texts ...string) []piece {
	out := []piece{{}}
	for _, s := range texts {
		out = append(out, piece{c: chunk{text: s}})
	}
	return append(out, piece{err: err})
}

func rateLimited(after time.Duration) error {
	return classify.Wrap(errors.New("429"), classify.Verdict{Class: classify.RateLimited, HTTPStatus: 429, RetryAfter: after, Reason: "scripted"})
}

// firstFails is a script whose first stream, over every member that
// shares order, is first; the others answer.
func firstFails(order *atomic.Int64, first []piece) func(int64) []piece {
	return func(int64) []piece {
		if order.Add(1) == 1 {
			return first
		}
		return answer("hel", "lo")
	}
}

func twoKeys(t *testing.T, a, b *member, sticky func(string) string) *pool.StreamPool[string, chunk] {
	t.Helper()
	sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Sticky: sticky, Members: []pool.StreamMember[string, chunk]{
		{Key: "key-a", Tier: a.tier()}, {Key: "key-b", Tier: b.tier()},
	}})
	require.NoError(t, err)
	return sp
}

func streamChain(t *testing.T, tier fallback.StreamTier[string, chunk], obs fallback.Observer) *fallback.StreamChain[string, chunk] {
	t.Helper()
	cfg := fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: tier, Retry: retry.Policy{MaxAttempts: 1}}}}
	if obs != nil {
		cfg.Observer = obs
	}
	c, err := fallback.NewStream(cfg)
	require.NoError(t, err)
	return c
}

// drain reads a stream to its end: the chunks, and the error that ended it.
func drain(seq iter.Seq2[chunk, error]) (got []chunk, last error) {
	for c, err := range seq {
		if err != nil {
			return got, err
		}
		got = append(got, c)
	}
	return got, nil
}

func inFlight(ms []pool.MemberInfo) int {
	n := 0
	for _, m := range ms {
		n += m.InFlight
	}
	return n
}

// A 429 on the first member before it sent anything with content moves
// the stream to the other member: the trail shows both member calls, the
// first as an upstream call of its own, and the consumer sees only the
// second member's chunks — not even the first one's role chunk.
func TestStreamRotatesOn429BeforeContent(t *testing.T) {
	for _, observed := range []bool{false, true} {
		name := map[bool]string{false: "no observer", true: "observed"}[observed]
		t.Run(name, func(t *testing.T) {
			var order atomic.Int64
			script := firstFails(&order, failing(rateLimited(0)))
			a, b := &member{name: "a", script: script}, &member{name: "b", script: script}
			sp := twoKeys(t, a, b, nil)
			var rec reported.Recorder
			var obs fallback.Observer
			if observed {
				obs = &rec
			}
			s := streamChain(t, sp, obs).Stream(context.Background(), "q")
			got, err := drain(s.Chunks())
			require.NoError(t, err)
			res := s.Result()
			assert.True(t, res.Complete)
			assert.Equal(t, 2, res.UpstreamCalls)
			trail := res.Attempts()
			require.Len(t, trail, 2)
			assert.Equal(t, classify.RateLimited, trail[0].Verdict.Class)
			assert.Equal(t, classify.OK, trail[1].Verdict.Class)
			require.NotEqual(t, trail[0].Member, trail[1].Member, "each call on its own member")
			ids := map[string]string{sp.Members()[0].ID: "a", sp.Members()[1].ID: "b"}
			served := ids[trail[1].Member]
			require.NotEmpty(t, served)
			require.NotEmpty(t, ids[trail[0].Member])
			var text strings.Builder
			for _, c := range got {
				assert.Equal(t, served, c.from, "a chunk of the member that was rotated away from")
				text.WriteString(c.text)
			}
			assert.Equal(t, "hello", text.String())
			assert.Equal(t, int64(1), a.calls.Load())
			assert.Equal(t, int64(1), b.calls.Load())
			assert.Zero(t, inFlight(sp.Members()))
			if observed {
				ended := reported.Of[fallback.AttemptEnd](&rec)
				require.Len(t, ended, 2)
				assert.Equal(t, trail[0].Member, ended[0].Member)
				assert.Equal(t, classify.RateLimited, ended[0].Verdict.Class)
				assert.Equal(t, trail[1].Member, ended[1].Member)
				assert.Equal(t, classify.OK, ended[1].Verdict.Class)
				first := reported.Of[fallback.FirstChunk](&rec)
				require.Len(t, first, 1)
				assert.Equal(t, trail[1].Member, first[0].Member)
			}
		})
	}
}

// Once the member sent content, a 429 is the stream's: it reaches the
// chain unchanged, which reports the stream incomplete, with one member
// call and no rotation.
func TestStream429AfterContentNeverRotates(t *testing.T) {
	var order atomic.Int64
	limited := rateLimited(0)
	script := firstFails(&order, failing(limited, "he"))
	a, b := &member{name: "a", script: script}, &member{name: "b", script: script}
	sp := twoKeys(t, a, b, nil)
	s := streamChain(t, sp, nil).Stream(context.Background(), "q")
	got, err := drain(s.Chunks())
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.ErrorIs(t, err, limited, "the member's error, unchanged")
	assert.Equal(t, classify.RateLimited, ie.V.Class)
	require.Len(t, got, 2, "the role chunk and the text")
	assert.Equal(t, "he", got[1].text)
	res := s.Result()
	assert.Equal(t, 1, res.UpstreamCalls)
	require.Len(t, res.Attempts(), 1)
	assert.Equal(t, int64(1), a.calls.Load()+b.calls.Load(), "no second member call")
	assert.Zero(t, inFlight(sp.Members()))
}

// A member's stream that closes cleanly with nothing in it is not
// rotated away from, and its chunks held back reach the chain, which
// therefore sees the finish reason: an empty answer, not a cut stream.
func TestStreamEmptyMemberHandsOverWhatItHeld(t *testing.T) {
	a := &member{name: "a", script: func(int64) []piece { return []piece{{}, {c: chunk{finish: "STOP"}}} }}
	sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{{Key: "key-a", Tier: a.tier()}}})
	require.NoError(t, err)
	s := streamChain(t, sp, nil).Stream(context.Background(), "q")
	_, err = drain(s.Chunks())
	require.ErrorIs(t, err, fallback.ErrEmptyStream)
	trail := s.Result().Attempts()
	require.Len(t, trail, 1)
	assert.Equal(t, classify.InvalidOutput, trail[0].Verdict.Class)

	got, err := drain(sp.Stream(context.Background(), "q"))
	require.NoError(t, err, "outside a chain, the stream as the member sent it")
	assert.Len(t, got, 2)
}

// The members of a pool serve streams and unary calls with one state: a
// storm of 429s that say "come back in 30 s" cools a key whichever side
// the calls came from, the other side skips it, and both sides' Observe
// hear of it once.
func TestStreamAndCallShareMemberState(t *testing.T) {
	for _, stormBy := range []string{"streams", "calls"} {
		t.Run("storm by "+stormBy, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var aCalls, aStreams atomic.Int64
				unaryA := fallback.Tier("pro", func(context.Context, string) (string, error) {
					aCalls.Add(1)
					return "", rateLimited(30 * time.Second)
				})
				unaryB := fallback.Tier("pro", func(context.Context, string) (string, error) { return "b", nil })
				p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
					{Key: "key-a", Tier: unaryA}, {Key: "key-b", Tier: unaryB},
				}})
				require.NoError(t, err)
				a := &member{name: "a", script: func(int64) []piece { aStreams.Add(1); return failing(rateLimited(30 * time.Second)) }}
				b := &member{name: "b", script: func(int64) []piece { return answer("b") }}
				// Given in the other order: members are matched by key.
				sp, err := pool.Streams(p, []pool.StreamMember[string, chunk]{{Key: "key-b", Tier: b.tier()}, {Key: "key-a", Tier: a.tier()}})
				require.NoError(t, err)
				var mu sync.Mutex
				var heard, heardStream []pool.MemberEvent
				defer p.Observe(func(e pool.MemberEvent) { mu.Lock(); heard = append(heard, e); mu.Unlock() })()
				defer sp.Observe(func(e pool.MemberEvent) { mu.Lock(); heardStream = append(heardStream, e); mu.Unlock() })()
				idA := p.Members()[0].ID
				stream := func() {
					got, err := drain(sp.Stream(context.Background(), "q"))
					require.NoError(t, err)
					require.NotEmpty(t, got)
					assert.Equal(t, "b", got[len(got)-1].from)
				}
				call := func() {
					out, err := p.Call(context.Background(), "q")
					require.NoError(t, err)
					assert.Equal(t, "b", out)
				}
				storm, other, stormed, spared := stream, call, &aStreams, &aCalls
				if stormBy == "calls" {
					storm, other, stormed, spared = call, stream, &aCalls, &aStreams
				}
				for i := 0; i < 20 && p.Members()[0].Out == pool.MemberIn; i++ {
					storm()
				}
				require.Equal(t, pool.MemberCooling, p.Members()[0].Out, "a storm of 429s cools key a")
				assert.Equal(t, pool.MemberCooling, sp.Members()[0].Out, "in the stream pool too, which lists the members in the pool's order, not Streams'")
				assert.Equal(t, pool.MemberIn, p.Members()[1].Out)
				n := stormed.Load()
				for range 10 {
					other()
					storm()
				}
				assert.Zero(t, spared.Load(), "the other side skips the cooled key")
				assert.Equal(t, n, stormed.Load(), "so does the side that cooled it")
				mu.Lock()
				require.Len(t, heard, 1)
				assert.Equal(t, heard, heardStream, "Observe on either side hears both")
				assert.Equal(t, idA, heard[0].Member)
				assert.Equal(t, pool.MemberCooling, heard[0].Out)
				assert.Equal(t, fallback.CoolStorm, heard[0].Rule)
				assert.Equal(t, 30*time.Second, heard[0].For)
				mu.Unlock()

				time.Sleep(31 * time.Second)
				assert.Equal(t, pool.MemberIn, p.Members()[0].Out, "back once its time has passed")
				assert.Zero(t, inFlight(p.Members()))
			})
		})
	}
}

// A consumer that stops mid-stream stops the member's stream and frees
// the member, in a chain and on its own; while the stream runs, the
// member counts it in flight.
func TestStreamConsumerBreakFreesMember(t *testing.T) {
	for _, inChain := range []bool{false, true} {
		name := map[bool]string{false: "alone", true: "in a chain"}[inChain]
		t.Run(name, func(t *testing.T) {
			a := &member{name: "a", script: func(int64) []piece { return answer("one", "two", "three", "four") }}
			br, err := breaker.New(breaker.Config{Name: "a"})
			require.NoError(t, err)
			sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{{Key: "key-a", Tier: a.tier(), Breaker: br}}})
			require.NoError(t, err)
			seq := sp.Stream(context.Background(), "q")
			if inChain {
				seq = streamChain(t, sp, nil).Stream(context.Background(), "q").Chunks()
			}
			for c, err := range seq {
				require.NoError(t, err)
				if c.text == "one" {
					assert.Equal(t, 1, sp.Members()[0].InFlight, "held while the stream runs")
					break
				}
			}
			assert.Zero(t, sp.Members()[0].InFlight)
			assert.Equal(t, int64(1), a.taken.Load(), "the role chunk was held back; the member stopped at the first text")
			assert.Equal(t, breaker.Closed, br.State())
		})
	}
}

// A panic in a member's stream frees the member on its way out.
func TestStreamPanicFreesMember(t *testing.T) {
	boom := fallback.StreamTierFunc("pro", func(context.Context, string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			yield(chunk{text: "x"}, nil)
			panic("member broke")
		}
	}, inspect)
	sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{{Key: "key-a", Tier: boom}}})
	require.NoError(t, err)
	assert.PanicsWithValue(t, "member broke", func() { drain(sp.Stream(context.Background(), "q")) })
	assert.Zero(t, sp.Members()[0].InFlight)
}

// With every member out — breakers open — a stream makes no upstream
// call: it yields one *fallback.SkipError, and a chain skips the tier.
func TestStreamNoMemberSkips(t *testing.T) {
	var brs []*breaker.Breaker
	var members []pool.StreamMember[string, chunk]
	var ms []*member
	for _, k := range []string{"key-a", "key-b"} {
		br, err := breaker.New(breaker.Config{Name: k})
		require.NoError(t, err)
		br.ForceOpen()
		m := &member{name: k, script: func(int64) []piece { return answer("x") }}
		brs, ms = append(brs, br), append(ms, m)
		members = append(members, pool.StreamMember[string, chunk]{Key: k, Tier: m.tier(), Breaker: br})
	}
	sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: members})
	require.NoError(t, err)
	assert.Equal(t, brs, sp.MemberBreakers())

	pairs := 0
	var last error
	for _, err := range sp.Stream(context.Background(), "q") {
		pairs++
		last = err
	}
	assert.Equal(t, 1, pairs)
	var se *fallback.SkipError
	require.ErrorAs(t, last, &se)
	assert.Equal(t, fallback.SkipOpen, se.Skip)

	s := streamChain(t, sp, nil).Stream(context.Background(), "q")
	_, err = drain(s.Chunks())
	require.Error(t, err)
	res := s.Result()
	assert.Zero(t, res.UpstreamCalls)
	trail := res.Attempts()
	require.Len(t, trail, 1)
	assert.Equal(t, fallback.SkipOpen, trail[0].Skip)
	assert.Zero(t, ms[0].calls.Load()+ms[1].calls.Load())
}

// Refused credentials take each member out (MemberAuth, told once); with
// every member refused, the stream fails closed with class Auth, and the
// next one makes no upstream call.
func TestStreamAllAuthFailsClosed(t *testing.T) {
	refused := classify.Wrap(errors.New("401"), classify.Verdict{Class: classify.Auth, HTTPStatus: 401})
	script := func(int64) []piece { return failing(refused) }
	a, b := &member{name: "a", script: script}, &member{name: "b", script: script}
	sp := twoKeys(t, a, b, nil)
	var heard []pool.MemberEvent
	defer sp.Observe(func(e pool.MemberEvent) { heard = append(heard, e) })()
	_, err := drain(sp.Stream(context.Background(), "q"))
	assert.Equal(t, classify.Auth, classify.Classify(err).Class)
	require.Len(t, heard, 2)
	assert.Equal(t, pool.MemberAuth, heard[0].Out)
	assert.Equal(t, pool.MemberAuth, heard[1].Out)
	assert.Equal(t, int64(2), a.calls.Load()+b.calls.Load())

	_, err = drain(sp.Stream(context.Background(), "q"))
	assert.Equal(t, classify.Auth, classify.Classify(err).Class)
	var se *fallback.SkipError
	assert.False(t, errors.As(err, &se), "fails closed, not skipped")
	assert.Equal(t, int64(2), a.calls.Load()+b.calls.Load(), "no upstream call")

	require.True(t, sp.Restore(heard[0].Member))
	assert.Len(t, heard, 3)
	assert.Equal(t, pool.MemberIn, heard[2].Out)
}

// A hedge goes to another member than the first call holds (the record's
// Avoid), even when Sticky would send it to the same one. StreamStage has
// no hedge yet: the stream pool is read here by a unary tier in a hedged
// unary chain, whose hedge record carries Avoid.
func TestStreamHedgeAvoidsFirstMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var order atomic.Int64
		script := func(int64) []piece {
			if order.Add(1) == 1 {
				p := answer("slow")
				p[1].wait = 5 * time.Second
				return p
			}
			return answer("fast")
		}
		a, b := &member{name: "a", script: script}, &member{name: "b", script: script}
		sp := twoKeys(t, a, b, func(string) string { return "conversation" })
		read := fallback.Tier("pro", func(ctx context.Context, in string) (string, error) {
			got, err := drain(sp.Stream(ctx, in))
			var text strings.Builder
			for _, c := range got {
				text.WriteString(c.text)
			}
			return text.String(), err
		})
		c, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
			{Tier: read, Hedge: fallback.Hedge{Delay: 100 * time.Millisecond, MaxExtra: 1}},
		}})
		require.NoError(t, err)
		res, err := c.Do(context.Background(), "q")
		require.NoError(t, err)
		assert.Equal(t, "fast", res.Value)
		trail := res.Attempts()
		require.Len(t, trail, 2)
		assert.True(t, trail[1].Hedge)
		assert.NotEmpty(t, trail[0].Member)
		assert.NotEqual(t, trail[0].Member, trail[1].Member, "the hedge avoids the first call's member")
		synctest.Wait()
		assert.Zero(t, inFlight(sp.Members()), "the losing stream freed its member")
	})
}

// Many streams at once over two keys, with 429s before content at
// random: every member call a member saw is on a trail, under that
// member, and every member is free at the end.
func TestStreamConcurrentCallsMatchTrails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		script := func(int64) []piece {
			if rand.IntN(3) == 0 {
				p := failing(rateLimited(0))
				p[0].wait = time.Duration(rand.IntN(20)) * time.Millisecond
				return p
			}
			p := answer("a", "b", "c")
			p[1].wait = time.Duration(rand.IntN(20)) * time.Millisecond
			return p
		}
		a, b := &member{name: "a", script: script}, &member{name: "b", script: script}
		sp := twoKeys(t, a, b, nil)
		c, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{Stages: []fallback.StreamStage[string, chunk]{{Tier: sp}}})
		require.NoError(t, err)
		var mu sync.Mutex
		perMember := map[string]int64{}
		upstream, complete := 0, 0
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				s := c.Stream(context.Background(), "q")
				got, err := drain(s.Chunks())
				res := s.Result()
				mu.Lock()
				defer mu.Unlock()
				if err == nil {
					complete++
					for _, g := range got {
						assert.Equal(t, got[0].from, g.from, "one member's chunks")
					}
				}
				upstream += res.UpstreamCalls
				for _, at := range res.Attempts() {
					if at.Skip == fallback.NotSkipped {
						perMember[at.Member]++
					}
				}
			})
		}
		wg.Wait()
		ms := sp.Members()
		assert.Equal(t, map[string]int64{ms[0].ID: a.calls.Load(), ms[1].ID: b.calls.Load()}, perMember)
		assert.Equal(t, int(a.calls.Load()+b.calls.Load()), upstream)
		assert.Greater(t, complete, 32)
		assert.Zero(t, inFlight(ms))
	})
}

// Streams matches members by key and names them by hash in its errors,
// never by key.
func TestStreamsChecksMembers(t *testing.T) {
	unary := fallback.Tier("pro", func(context.Context, string) (string, error) { return "", nil })
	p, err := pool.New(pool.Config[string, string]{Name: "pro", Members: []pool.Member[string, string]{
		{Key: "secret-key-a", Tier: unary}, {Key: "secret-key-b", Tier: unary}, {Key: "secret-key-c", Tier: unary},
	}})
	require.NoError(t, err)
	st := (&member{script: func(int64) []piece { return nil }}).tier()
	br, err := breaker.New(breaker.Config{Name: "b"})
	require.NoError(t, err)
	_, err = pool.Streams(p, []pool.StreamMember[string, chunk]{
		{Key: "secret-key-a", Tier: st},
		{Key: "secret-key-a", Tier: st},
		{Key: "secret-key-z", Tier: st},
		{Key: "secret-key-b", Tier: st, Breaker: br},
	})
	require.Error(t, err)
	msg := err.Error()
	assert.NotContains(t, msg, "secret")
	ids := p.Members()
	assert.Contains(t, msg, "member 1 ("+ids[0].ID+"): Key is used twice")
	assert.Contains(t, msg, "Key is not a member of the pool")
	assert.Contains(t, msg, "member 3 ("+ids[1].ID+"): Breaker, Limiter, Weight and CoolDown")
	assert.Contains(t, msg, "member "+ids[2].ID+" has no stream tier")

	_, err = pool.NewStream(pool.StreamConfig[string, chunk]{Members: []pool.StreamMember[string, chunk]{{Key: "secret-key-a"}}})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "Name is required")
	assert.Contains(t, err.Error(), "("+ids[0].ID+"): Tier is required")
	assert.NotContains(t, err.Error(), "secret")
}

// A consumer that stops says nothing of the member: a half-open breaker's
// probe that the consumer cut short neither closes nor opens it.
func TestStreamConsumerStopSaysNothingOfMember(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		unavailable := classify.Wrap(errors.New("503"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})
		a := &member{name: "a", script: func(n int64) []piece {
			if n == 1 {
				return failing(unavailable)
			}
			return answer("one", "two")
		}}
		br, err := breaker.New(breaker.Config{Name: "a", ConsecutiveFailures: 1, Cooldown: time.Second})
		require.NoError(t, err)
		sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{{Key: "key-a", Tier: a.tier(), Breaker: br}}})
		require.NoError(t, err)
		_, err = drain(sp.Stream(context.Background(), "q"))
		require.ErrorIs(t, err, unavailable)
		require.Equal(t, breaker.Open, br.State())
		time.Sleep(2 * time.Second)
		for c := range sp.Stream(context.Background(), "q") {
			if c.text == "one" {
				break
			}
		}
		assert.Equal(t, int64(2), a.calls.Load(), "the probe was let through")
		assert.NotEqual(t, breaker.Closed, br.State(), "a stream its consumer stopped proved nothing")
		_, err = drain(sp.Stream(context.Background(), "q"))
		require.NoError(t, err)
		assert.Equal(t, breaker.Closed, br.State(), "one that ran to its end did")
	})
}

// An exhausted quota is its member's, before the stream committed or
// after: the member is parked, and the chain does not park the tier,
// whose other member still serves.
func TestStreamQuotaParksTheMemberNotTheTier(t *testing.T) {
	quota := classify.Wrap(errors.New("429 per day"), classify.Verdict{Class: classify.QuotaExhausted, RetryAfter: 45 * time.Second})
	for _, after := range []bool{false, true} {
		name := map[bool]string{false: "before content", true: "after content"}[after]
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				script := func(int64) []piece {
					if after {
						return failing(quota, "he")
					}
					return failing(quota)
				}
				a := &member{name: "a", script: script}
				b := &member{name: "b", script: func(int64) []piece { return answer("b") }}
				sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Sticky: func(s string) string { return s }, Members: []pool.StreamMember[string, chunk]{
					{Key: "key-a", Tier: a.tier()}, {Key: "key-b", Tier: b.tier()},
				}})
				require.NoError(t, err)
				// Only a's stream here: the quota ends the attempt.
				alone, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", Members: []pool.StreamMember[string, chunk]{{Key: "key-a", Tier: a.tier()}}})
				require.NoError(t, err)
				for _, tier := range []*pool.StreamPool[string, chunk]{alone, sp} {
					c := streamChain(t, tier, nil)
					for i := range 4 {
						_, _ = drain(c.Stream(context.Background(), string(rune('a'+i))).Chunks())
					}
					until, why := c.ParkedUntil(0)
					assert.True(t, until.IsZero(), "the tier is not parked")
					assert.Equal(t, fallback.NotSkipped, why)
					assert.Equal(t, pool.MemberQuota, tier.Members()[0].Out)
				}
				assert.Positive(t, b.calls.Load(), "b serves")
			})
		})
	}
}

// LatencyAware weighs a member by how soon its streams start to answer,
// not by how long they run: the member quick to its first chunk with
// content gets the streams, however long its answers go on.
func TestStreamLatencyAwareUsesTimeToFirstContent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		slowStart := &member{name: "slow start", script: func(int64) []piece {
			p := answer("a", "b")
			p[1].wait = 500 * time.Millisecond
			return p
		}}
		longTail := &member{name: "long tail", script: func(int64) []piece {
			p := answer("a", "b")
			p[1].wait = 50 * time.Millisecond
			p[2].wait = 2 * time.Second
			return p
		}}
		sp, err := pool.NewStream(pool.StreamConfig[string, chunk]{Name: "pro", LatencyAware: true, Members: []pool.StreamMember[string, chunk]{
			{Key: "key-a", Tier: slowStart.tier()}, {Key: "key-b", Tier: longTail.tier()},
		}})
		require.NoError(t, err)
		for range 8 {
			_, err := drain(sp.Stream(context.Background(), "q"))
			require.NoError(t, err)
		}
		assert.Equal(t, int64(1), slowStart.calls.Load(), "tried once, then passed over")
		assert.Equal(t, int64(7), longTail.calls.Load())
	})
}
