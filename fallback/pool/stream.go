package pool

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/ratelimit"
	"github.com/tierguard/tierguard/internal/keyed"
)

// StreamMember is a pool member that answers with a stream: one
// deployment of the model, as Member, through a fallback.StreamTier.
type StreamMember[In, Chunk any] struct {
	// Key identifies the member, as Member.Key: required, unique, never
	// shown (the member is named by a hash of it).
	Key string
	// Tier makes the member's streams. Required.
	Tier fallback.StreamTier[In, Chunk]
	// Breaker, Limiter, Weight and CoolDown are as in Member, for a pool
	// built by NewStream. Streams refuses them: a member of a pool that
	// serves both has one breaker, one limiter and one rule, its Member's.
	Breaker  *breaker.Breaker
	Limiter  *ratelimit.Limiter
	Weight   int
	CoolDown *fallback.CoolDown
}

// StreamConfig configures a StreamPool that serves streams only; the
// fields mean what they mean in Config.
type StreamConfig[In, Chunk any] struct {
	// Name is the tier's name. Required.
	Name string
	// Members are the deployments, at least one and at most 64.
	Members []StreamMember[In, Chunk]
	// Balance chooses among healthy members; LeastInFlight by default.
	Balance Balance
	// LatencyAware weighs each member's streams in flight by how soon its
	// streams start to answer (the time to their first chunk with content).
	LatencyAware bool
	// Sticky returns a request key whose streams go to the same member
	// while it is healthy; "" means no affinity for that request.
	Sticky func(in In) string
	// AuthCooldown is how long a member refused for its credentials is
	// kept out; 0 means 10m.
	AuthCooldown time.Duration
}

// StreamPool is a streaming tier backed by several members of the same
// model: the stream side of a Pool. Each stream picks a member as Pool.Call
// does, and moves to the next member after a 429, an exhausted quota or an
// Auth failure only while nothing has been shown: before the member's
// first chunk with content (its commit point, as a fallback.StreamChain
// sees it). Past that point a failure is the stream's, and reaches the
// consumer unchanged.
//
// A StreamPool made by Streams shares its members' state with the Pool it
// serves: their cool-downs, parking, Auth refusals, breakers, limiters,
// calls in flight and the evidence of their 429s are one state, whichever
// side a call came from, and Observe on either tells of both.
type StreamPool[In, Chunk any] struct {
	p      *pool
	tiers  []fallback.StreamTier[In, Chunk]
	sticky func(In) string
}

// NewStream returns a pool that serves streams only, or an error naming
// every invalid field. To serve unary calls as well over the same
// members, build a Pool with New and its stream side with Streams.
func NewStream[In, Chunk any](cfg StreamConfig[In, Chunk]) (*StreamPool[In, Chunk], error) {
	specs, tiers := split(cfg.Members, func(m StreamMember[In, Chunk]) (memberSpec, fallback.StreamTier[In, Chunk]) {
		return memberSpec{key: m.Key, hasTier: m.Tier != nil, breaker: m.Breaker, limiter: m.Limiter, weight: m.Weight, coolDown: m.CoolDown}, m.Tier
	})
	p, err := newPool(poolSpec{name: cfg.Name, balance: cfg.Balance, latencyAware: cfg.LatencyAware, authCooldown: cfg.AuthCooldown}, specs)
	if err != nil {
		return nil, err
	}
	return &StreamPool[In, Chunk]{p: p, tiers: tiers, sticky: cfg.Sticky}, nil
}

// Streams returns the stream side of p: the same members, each streaming
// through the tier of the StreamMember with its Key, with p's state and
// p's Sticky. Members are matched by Key, never by position, so that no
// key's traffic goes out on another key's tier. Every member of p needs
// one; a key p does not have, a key given twice, and a StreamMember that
// sets what only p's Member may (Breaker, Limiter, Weight, CoolDown) are
// errors, which name the member by the hash of its key.
func Streams[In, Out, Chunk any](p *Pool[In, Out], members []StreamMember[In, Chunk]) (*StreamPool[In, Chunk], error) {
	if p == nil {
		return nil, errors.New("pool: Streams of a nil *Pool")
	}
	tiers := make([]fallback.StreamTier[In, Chunk], len(p.p.members))
	matched := make([]bool, len(p.p.members))
	var errs []error
	for i, m := range members {
		id := "#" + keyed.Hash(m.Key)
		j := p.p.indexOfKey(m.Key)
		switch {
		case m.Key == "":
			errs = append(errs, fmt.Errorf("member %d: Key is required", i))
			continue
		case j < 0:
			errs = append(errs, fmt.Errorf("member %d (%s): Key is not a member of the pool", i, id))
			continue
		case matched[j]:
			errs = append(errs, fmt.Errorf("member %d (%s): Key is used twice", i, id))
			continue
		}
		matched[j] = true
		if m.Tier == nil {
			errs = append(errs, fmt.Errorf("member %d (%s): Tier is required", i, id))
		}
		if m.Breaker != nil || m.Limiter != nil || m.Weight != 0 || m.CoolDown != nil {
			errs = append(errs, fmt.Errorf("member %d (%s): Breaker, Limiter, Weight and CoolDown are the pool's Member's; set them there", i, id))
		}
		tiers[j] = m.Tier
	}
	for j, ok := range matched {
		if !ok {
			errs = append(errs, fmt.Errorf("member %s has no stream tier", p.p.members[j].id))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("pool: invalid streams of pool %q: %w", p.p.name, err)
	}
	return &StreamPool[In, Chunk]{p: p.p, tiers: tiers, sticky: p.sticky}, nil
}

// indexOfKey returns the position of the member whose key is key, or -1.
func (p *pool) indexOfKey(key string) int {
	sum := sha256.Sum256([]byte(key))
	for i := range p.members {
		if p.members[i].sum == sum {
			return i
		}
	}
	return -1
}

// Name returns the pool's tier name.
func (p *StreamPool[In, Chunk]) Name() string { return p.p.name }

// Inspect describes a chunk with the first member's tier. The members
// serve one model through one adapter, so their chunks read alike: the
// chain asks without saying which member a chunk came from, and a pool
// whose members' adapters read chunks differently is not one model.
func (p *StreamPool[In, Chunk]) Inspect(c Chunk) fallback.ChunkInfo { return p.tiers[0].Inspect(c) }

// Members describes the pool's members, in order; a stream counts in
// flight until it ends.
func (p *StreamPool[In, Chunk]) Members() []MemberInfo { return p.p.describe() }

// MemberBreakers returns the members' own breakers, as Pool.MemberBreakers.
func (p *StreamPool[In, Chunk]) MemberBreakers() []*breaker.Breaker { return p.p.breakers() }

// Restore puts the member named id back in rotation at once, for streams
// and unary calls alike, and reports whether there was one.
func (p *StreamPool[In, Chunk]) Restore(id string) bool { return p.p.restore(id) }

// Observe hands every member leaving or rejoining rotation to fn, as
// Pool.Observe: for a pool made by Streams, whichever side's call moved
// it.
func (p *StreamPool[In, Chunk]) Observe(fn func(MemberEvent)) (remove func()) {
	return p.p.observers.Add(fn)
}

// Stream streams in's answer from one member. Until the member's first
// chunk with content, its chunks without any (a role, blank text) are
// held back; a 429, an exhausted quota or an Auth failure then moves the
// stream to the next member, and the held chunks are dropped with the
// member. From that chunk on, the member's chunks and its error pass
// through as they come. When no member can take the stream, it yields
// one error and makes no upstream call: a *fallback.SkipError, or an
// error of class Auth when every member was refused for its credentials.
//
// The member's sequence runs inside the returned one, on the consumer's
// goroutine; breaking out of it stops the member's stream and frees the
// member.
func (p *StreamPool[In, Chunk]) Stream(ctx context.Context, in In) iter.Seq2[Chunk, error] {
	return func(yield func(Chunk, error) bool) {
		s := &memberStream[In, Chunk]{yield: yield}
		s.take = s.push
		p.stream(ctx, in, s)
	}
}

func (p *StreamPool[In, Chunk]) stream(ctx context.Context, in In, s *memberStream[In, Chunk]) {
	rec := fallback.RecordOf(ctx)
	rules := rec.Rules()
	tokens := rec.Estimate()
	rec.CountCalls()
	tried := p.p.avoided(rec)
	key := stickyKey(p.sticky, in)
	m, tok, probe, why := p.p.enter(key, tried, tokens)
	if m < 0 {
		var zero Chunk
		s.yield(zero, p.p.none(why))
		return
	}
	for {
		tried |= 1 << m
		v, latency := p.streamMember(ctx, rec, s, m, tok, probe, rules, tokens, in)
		next := -1
		if !s.committed && refused(s.err) {
			// The member's own wrapper made no call: the next member is
			// tried, with no rotation to tell.
			if next, tok, probe, _ = p.p.enter(key, tried, tokens); next < 0 {
				var zero Chunk
				s.yield(zero, s.err)
				return
			}
			m = next
			continue
		}
		if s.err != nil && !s.committed && rotates(v.Class) && ctx.Err() == nil {
			// Nothing was shown: the stream may still go to another
			// member. Taken before the failure is told as a rotation, as
			// in Call.
			next, tok, probe, _ = p.p.enter(key, tried, tokens)
		}
		if next < 0 {
			if s.err != nil && (v.Class == classify.QuotaExhausted || v.Class == classify.RateLimited) {
				rec.MemberFailed()
			}
			if !s.committed && !s.stopped {
				// The member's stream ends the attempt: what it held back
				// is the consumer's, then its error.
				s.release()
			}
			return
		}
		ctx = rec.Rotated(ctx, s.err, v, latency)
		m = next
	}
}

// streamMember streams from member m, holding its breaker token tok,
// and settles it once its sequence returns: the member's breaker,
// limiter, latency and parking. It returns the member's verdict and how
// long its stream ran.
func (p *StreamPool[In, Chunk]) streamMember(ctx context.Context, rec *fallback.Record, s *memberStream[In, Chunk], m int, tok breaker.Token, probe int64, rules fallback.Rules, tokens int64, in In) (classify.Verdict, time.Duration) {
	pm := &p.p.members[m]
	defer pm.EndProbe(probe)
	rec.Member(pm.id)
	before, _ := rec.Tokens()
	s.begin(p.tiers[m])
	settled := false
	defer func() {
		if !settled {
			// A panic, the member's or the consumer's: free the member
			// without deciding anything.
			p.p.done(m, tok, classify.Verdict{Class: classify.Canceled, Reason: "the stream panicked"}, breaker.Ignored, 0, rules, false)
		}
	}()
	p.tiers[m].Stream(ctx, in)(s.take)
	latency := time.Since(s.start)
	if !s.committed && refused(s.err) {
		settled = true
		rec.NoCall()
		p.p.free(m, tok)
		return classify.Verdict{}, 0
	}
	var v classify.Verdict
	var o breaker.Outcome
	switch {
	case s.stopped:
		// The consumer stopped (or a hedge lost): nothing is known of the
		// member, whether or not the context says so.
		v, o = classify.Verdict{Class: classify.Canceled, Reason: "consumer stopped"}, breaker.Ignored
	case s.err == nil && !s.committed:
		// Closed cleanly with nothing in it: an empty answer when a chunk
		// said it was finished, else a cut stream — as the chain judges
		// it.
		v, o = outcome(rules, ctx, emptyStream(s.finished))
	default:
		v, o = outcome(rules, ctx, s.err)
	}
	if l := pm.limiter; l != nil && (s.committed || s.err == nil) {
		// The member answered, in whole or in part: its usage says what
		// that cost.
		if after, ok := rec.Tokens(); ok {
			if delta := after - before - tokens; delta != 0 {
				l.Adjust(delta)
			}
		}
	}
	seen := time.Duration(0)
	if s.committed {
		// How soon a member starts to answer is what a consumer waits
		// for; how long the answer runs is the answer's.
		seen = s.toCommit
	}
	settled = true
	p.p.done(m, tok, v, o, seen, rules, probe != 0)
	return v, latency
}

// emptyStream is the failure of a member's stream that closed without
// content: an empty answer when a chunk carried a finish reason, a cut
// stream otherwise.
func emptyStream(finished bool) error {
	if finished {
		return classify.Wrap(fallback.ErrEmptyStream, classify.Verdict{Class: classify.InvalidOutput, Reason: "empty stream"})
	}
	return classify.Wrap(fallback.ErrEmptyStream, classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"})
}

// memberStream is a stream through the pool: the consumer's yield, and
// what the member being read has sent so far.
type memberStream[In, Chunk any] struct {
	yield func(Chunk, error) bool
	// take is push, made once per stream rather than once per member.
	take  func(Chunk, error) bool
	tier  fallback.StreamTier[In, Chunk]
	start time.Time
	// held are the member's chunks before its first with content, in buf
	// while they fit.
	held []Chunk
	buf  [2]Chunk
	// committed is set at the member's first chunk with content, toCommit
	// when it came; finished when a chunk before it had a finish reason.
	committed, finished bool
	toCommit            time.Duration
	// stopped is set when the consumer stopped, over once the member's
	// sequence must not go on, err at the member's first error.
	stopped, over bool
	err           error
}

// begin starts reading member tier t.
func (s *memberStream[In, Chunk]) begin(t fallback.StreamTier[In, Chunk]) {
	clear(s.buf[:])
	s.tier, s.start, s.held = t, time.Now(), s.buf[:0]
	s.committed, s.finished, s.stopped, s.over, s.err, s.toCommit = false, false, false, false, nil, 0
}

// push takes the member's next pair; false stops the member's sequence.
func (s *memberStream[In, Chunk]) push(c Chunk, err error) bool {
	if s.over {
		// A sequence that goes on after it was told to stop.
		return false
	}
	if err != nil {
		if s.err == nil {
			s.err = err
		}
		if !s.committed {
			// Held until the pool decides: another member, or this error.
			s.over = true
			return false
		}
		if !s.yield(c, err) {
			s.over = true
			return false
		}
		return true
	}
	if !s.committed {
		info := s.tier.Inspect(c)
		if !info.NonTextContent && strings.TrimSpace(info.Text) == "" {
			s.held = append(s.held, c)
			s.finished = s.finished || info.FinishReason != ""
			return true
		}
		s.committed, s.toCommit = true, time.Since(s.start)
		for _, h := range s.held {
			if !s.give(h) {
				return false
			}
		}
		clear(s.held)
		s.held = nil
	}
	return s.give(c)
}

// give hands a chunk to the consumer; false when it stopped.
func (s *memberStream[In, Chunk]) give(c Chunk) bool {
	if s.yield(c, nil) {
		return true
	}
	s.over, s.stopped = true, true
	return false
}

// release hands the consumer what a member that sent no content ended
// with: its chunks held back, then its error, if any.
func (s *memberStream[In, Chunk]) release() {
	for _, h := range s.held {
		if !s.yield(h, nil) {
			return
		}
	}
	if s.err != nil {
		var zero Chunk
		s.yield(zero, s.err)
	}
}
