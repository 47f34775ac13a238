package chaos

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/tierguard/tierguard/classify"
)

// ErrInjected matches every error an injected fault returns.
var ErrInjected = errors.New("chaos: injected fault")

// InjectedError is the error an injected fault makes a call return. It
// wraps what a real tier would return in the same situation — the
// upstream's error response as a *classify.HTTPError, io.ErrUnexpectedEOF
// for a cut connection, the context's error for a stall — so the chain
// classifies it exactly as it would the real failure, while errors.Is(err,
// ErrInjected) tells a drill's fault from a real one.
type InjectedError struct {
	// Fault names the fault (Fault.String).
	Fault string
	// Err is what the call returns in substance.
	Err error
}

// Error names the fault and what it stands for; like the library's other
// errors it quotes no upstream text.
func (e *InjectedError) Error() string { return "chaos: injected " + e.Fault + ": " + e.Err.Error() }

// Unwrap returns the error the fault stands for.
func (e *InjectedError) Unwrap() error { return e.Err }

// Is reports whether target is ErrInjected.
func (e *InjectedError) Is(target error) bool { return target == ErrInjected }

// errFinish is what a FinishReason fault stands for: a 200 whose finish
// reason makes it unusable, which the SDK adapters return wrapped with its
// classify.FinishReason verdict.
var errFinish = errors.New("answer ended with an unusable finish reason")

// kind says what a fault does.
type kind uint8

const (
	kindNone kind = iota
	// kindLatency delays the call, then lets it through.
	kindLatency
	// kindStall waits for the call's context to end.
	kindStall
	// kindFail answers with an error response.
	kindFail
	// kindAnswer answers with a given text instead of calling the tier.
	kindAnswer
	// kindFinish ends the answer with a finish reason that makes it unusable.
	kindFinish
	// kindNoFinish ends the answer without a finish reason.
	kindNoFinish
	// kindCut drops the connection after some chunks.
	kindCut
	// kindGap pauses a stream after some chunks.
	kindGap
	// kindKeepalive sends SSE comment lines between events.
	kindKeepalive
)

// Fault is what an injection does to one call. Build it with Latency,
// RandomLatency, Stall, Fail, Answer, MalformedJSON, EmptyText,
// FinishReason, NoFinishReason, CutAfter, IdleGap or Keepalive; the zero
// Fault does nothing and a Drill refuses it.
//
// Not every fault fits every place a drill can inject it: a wrapped
// fallback.ModelTier, a wrapped fallback.StreamTier, or an http.RoundTripper
// (Transport). Where a fault does not fit, the call goes through untouched
// and the rule's Status counts it as Unsupported; each constructor says
// where its fault applies.
type Fault struct {
	kind kind
	// minDelay and maxDelay bound the delay before the fault acts (for
	// latency faults, the latency itself); drawn uniformly from the drill's
	// seed when they differ.
	minDelay, maxDelay time.Duration
	resp               *failure
	text, label        string
	reason             string
	chunks             int
	gap                time.Duration
}

// failure is a Fail fault's response, read once into the facts a client
// would read from it.
type failure struct {
	resp  Response
	facts classify.Facts
}

// Latency delays each call it hits by d, then lets it through; a context
// that ends first ends the call with the context's error. On a stream it
// delays the first chunk, on a Transport the request.
func Latency(d time.Duration) Fault {
	return Fault{kind: kindLatency, minDelay: d, maxDelay: d}
}

// RandomLatency delays each call it hits by a time drawn uniformly from
// [lo, hi] with the drill's seed, then lets it through. Applies where
// Latency does.
func RandomLatency(lo, hi time.Duration) Fault {
	return Fault{kind: kindLatency, minDelay: lo, maxDelay: hi}
}

// Stall holds each call it hits until its context ends, and returns the
// context's error: an upstream that accepted the request and never
// answered. The chain's per-try timeout, the reserve for later tiers or
// the deadline ends it. Applies everywhere (on a Transport it holds the
// request until its context ends).
func Stall() Fault { return Fault{kind: kindStall} }

// Fail answers each call it hits with r, without calling the upstream: a
// wrapped tier returns the error a client reads from r (a
// *classify.HTTPError built by classify.ReadResponse from r's status,
// headers and body, inside an *InjectedError), a Transport serves r's bytes
// to the client, whose SDK parses them as it would the real response. A
// stream fails before its first chunk. Applies everywhere.
func Fail(r Response) Fault {
	resp := &http.Response{StatusCode: r.status, Header: r.Header(), Body: io.NopCloser(strings.NewReader(r.body))}
	he := classify.ReadResponse(context.Background(), resp)
	return Fault{kind: kindFail, resp: &failure{resp: r, facts: he.Facts}}
}

// Answer makes each call it hits answer text at once, without calling the
// upstream: a 200 whose content the stage's validator should judge. On a
// wrapped tier whose answers are strings the answer is text itself;
// TierWithAnswers makes other answer types from text. Streams and
// Transports do not support it (EmptyText aside).
func Answer(name, text string) Fault {
	return Fault{kind: kindAnswer, text: text, label: name}
}

// MalformedJSON answers `{"answer": "this JSON is cut off`: a 200 whose
// JSON ends early, as a model's answer does when it runs out of output
// tokens mid-object. A validate.JSON or jsonschema.Compile validator rejects it.
// Applies where Answer does.
func MalformedJSON() Fault { return Answer("malformed_json", `{"answer": "this JSON is cut off`) }

// EmptyText answers with no text: a 200 a validate.NonEmpty validator
// rejects. On a stream it ends the stream cleanly without any chunk (the
// chain reports fallback.ErrEmptyStream). Applies to wrapped tiers and
// streams, not to Transports.
func EmptyText() Fault { return Answer("empty_text", "") }

// FinishReason ends each answer it hits with reason ("RECITATION",
// "MALFORMED_FUNCTION_CALL", "OTHER", "MAX_TOKENS" with nothing in it,
// "SAFETY"), as the SDK adapters report it: an error carrying the verdict
// classify.FinishReason gives that reason (InvalidOutput, or Safety, which
// fails closed). A wrapped tier returns it without calling the upstream; a
// stream passes the upstream's chunks through and returns it in place of
// the chunk that carries the real finish reason. Transports do not
// support it.
func FinishReason(reason string) Fault { return Fault{kind: kindFinish, reason: reason} }

// NoFinishReason makes answers end without a finish reason: a stream passes
// the upstream's chunks through and ends cleanly in place of the chunk that
// carries the finish reason (what a tier surfaces for an answer the server
// stopped sending; the chain reports the stream incomplete), a wrapped tier
// returns the error an adapter returns for a candidate without one
// (InvalidOutput), without calling the upstream. Transports do not support
// it.
func NoFinishReason() Fault { return Fault{kind: kindNoFinish} }

// CutAfter drops the connection after k chunks: a stream yields the
// upstream's first k chunks, then io.ErrUnexpectedEOF (inside an
// *InjectedError) as a cut connection does; a Transport passes k
// server-sent events of an event stream through (half the body of any
// other response), then fails the body's Read with io.ErrUnexpectedEOF. A
// wrapped unary tier returns io.ErrUnexpectedEOF without calling the
// upstream. k ≤ 0 cuts before the first chunk.
func CutAfter(k int) Fault { return Fault{kind: kindCut, chunks: max(k, 0)} }

// IdleGap pauses a stream for d after its first k chunks (a Transport: k
// server-sent events, or before the body of any other response), honouring
// the context: the chain's IdleTimeout should end a stream that pauses
// longer than it. A wrapped unary tier waits d before calling the upstream,
// as Latency does.
func IdleGap(k int, d time.Duration) Fault {
	return Fault{kind: kindGap, chunks: max(k, 0), gap: d}
}

// Keepalive makes a Transport write an SSE comment line, ": keepalive",
// before every event of an event stream, as servers and proxies do to keep
// a quiet connection open. A client must skip them; some SDK stream readers
// fail on them instead. Only Transports support it: a wrapped tier sees
// what its client made of the comments.
func Keepalive() Fault { return Fault{kind: kindKeepalive} }

// Delayed returns f acting after a delay drawn uniformly from [lo, hi]
// with the drill's seed (fixed when lo == hi): a 503 that takes two seconds
// to arrive, a stall that begins late. On a latency fault it replaces the
// latency.
func (f Fault) Delayed(lo, hi time.Duration) Fault {
	f.minDelay, f.maxDelay = lo, hi
	return f
}

// String names the fault for reports and errors: "latency_40ms",
// "fail_gemini_503_overloaded", "stall", "cut_after_2", ...
func (f Fault) String() string {
	var s string
	switch f.kind {
	case kindNone:
		return "none"
	case kindLatency:
		return "latency_" + delayName(f.minDelay, f.maxDelay)
	case kindStall:
		s = "stall"
	case kindFail:
		s = "fail_" + f.resp.resp.name
	case kindAnswer:
		s = "answer_" + f.label
	case kindFinish:
		s = "finish_" + f.reason
	case kindNoFinish:
		s = "no_finish_reason"
	case kindCut:
		s = "cut_after_" + strconv.Itoa(f.chunks)
	case kindGap:
		s = "idle_gap_" + f.gap.String() + "_after_" + strconv.Itoa(f.chunks)
	case kindKeepalive:
		s = "keepalive"
	}
	if f.maxDelay > 0 {
		s += "_after_" + delayName(f.minDelay, f.maxDelay)
	}
	return s
}

func delayName(lo, hi time.Duration) string {
	if lo == hi {
		return lo.String()
	}
	return lo.String() + "-" + hi.String()
}

// where says which kind of injection point is asking.
type where uint8

const (
	atTier where = 1 << iota
	atTierAnswers
	atStream
	atTransport
)

// fits reports whether f can be injected at w.
func (f Fault) fits(w where) bool {
	switch f.kind {
	case kindLatency, kindStall, kindFail, kindCut, kindGap:
		return true
	case kindAnswer:
		return w&atTierAnswers != 0 || (w&atStream != 0 && f.text == "")
	case kindFinish, kindNoFinish:
		return w&(atTier|atStream) != 0
	case kindKeepalive:
		return w&atTransport != 0
	}
	return false
}

// check reports what makes f unusable, or nil.
func (f Fault) check() error {
	switch {
	case f.kind == kindNone:
		return errors.New("no fault")
	case f.minDelay < 0 || f.maxDelay < f.minDelay:
		return errors.New("delay bounds must satisfy 0 ≤ lo ≤ hi, got " + f.minDelay.String() + ", " + f.maxDelay.String())
	case f.kind == kindGap && f.gap <= 0:
		return errors.New("idle gap must be positive")
	case f.kind == kindFinish && f.reason == "":
		return errors.New("finish reason is empty (use NoFinishReason)")
	}
	return nil
}

// delay draws the delay before f acts, from u.
func (f Fault) delay(u uint64) time.Duration {
	if f.maxDelay <= f.minDelay {
		return f.minDelay
	}
	return f.minDelay + time.Duration(u%uint64(f.maxDelay-f.minDelay+1))
}

// err returns the error f makes a wrapped tier's call return, for the
// faults that return one without calling the upstream.
func (f Fault) err() error {
	var e error
	switch f.kind {
	case kindFail:
		facts := f.resp.facts
		e = &classify.HTTPError{Facts: facts}
	case kindFinish:
		e = classify.Wrap(errFinish, classify.FinishReason(f.reason, false))
	case kindNoFinish:
		e = classify.Wrap(errNoFinish, classify.FinishReason("", false))
	case kindCut:
		e = io.ErrUnexpectedEOF
	}
	return &InjectedError{Fault: f.String(), Err: e}
}

// errNoFinish is what a unary NoFinishReason fault stands for.
var errNoFinish = errors.New("answer has no finish reason")

// ctxErr wraps the context's error of a call a fault held until its end.
func ctxErr(f Fault, err error) error { return &InjectedError{Fault: f.String(), Err: err} }
