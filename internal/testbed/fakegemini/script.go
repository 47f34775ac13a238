package fakegemini

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"time"
)

// Always is the probability of a rule that fires whenever its other
// conditions hold: Rule{Kind: Retired, P: Always}.
const Always = 1.0

// Script tells the server how one model behaves. The zero Script answers
// every request with a default success at once.
type Script struct {
	// Latency is waited before every 200 answer (including the 200-status
	// faults and the first byte of a stream).
	Latency Latency
	// FaultLatency is waited before every error answer and before Drop.
	FaultLatency Latency
	// Rules are tried in order; the first that fires decides the request's
	// fate. When none fires the request succeeds.
	Rules []Rule
	// Reply gives the answer text. Nil means a short deterministic answer:
	// "answer from MODEL: PROMPT" (the prompt cut to 64 runes), or, when the
	// request asked for JSON, {"model":MODEL,"answer":PROMPT}.
	Reply Reply
	// Chunks is how many stream chunks the answer text is split into
	// (default 3, at most one per rune, at least one).
	Chunks int
	// ChunkDelay is waited between stream chunks.
	ChunkDelay time.Duration
	// KeepAlive writes an SSE comment line (": keepalive") before every
	// stream chunk but the first. Beware: google.golang.org/genai's stream
	// reader does not skip SSE comments; it yields an "invalid stream chunk"
	// error for them.
	KeepAlive bool
}

// Rule injects one fault. It fires when every condition that is set holds
// and then a random draw falls below P.
type Rule struct {
	// Kind is the fault to inject; any kind but Success and Canceled.
	Kind Kind
	// P is the probability, in [0,1], that the rule fires when its
	// conditions hold. The zero value never fires; use [Always] (1) for a
	// rule that always fires.
	P float64
	// From and Until bound the active window [From, Until) on the server's
	// clock ([WithNow]). A zero time leaves that side open.
	From, Until time.Time
	// FirstN, when positive, limits the rule to the model's first N requests
	// since its script was set (requests are numbered from 1).
	FirstN int
	// Every, when positive, limits the rule to every Nth request (the
	// request number is a multiple of Every).
	Every int
	// Key, when set, limits the rule to requests made with that API key,
	// so that one key of a pool can misbehave while the others sharing
	// its model do not. Requests are still numbered per model (FirstN,
	// Every), whichever key they came with.
	Key string
	// Params tunes the injected answer.
	Params Params
}

// Params tunes the answer of a fault. Zero fields take the documented
// defaults. The same type feeds [ErrorResponse] and [OpenAIErrorResponse].
type Params struct {
	// Model is the model id named in messages and quota dimensions
	// ("gemini-2.5-pro", without "models/"). The server fills it in from the
	// request when empty.
	Model string
	// APIVersion is "v1beta" (default) or "v1", used in NOT_FOUND messages.
	// The server fills it in from the request when empty.
	APIVersion string
	// Method is the RPC named in NOT_FOUND messages: "generateContent"
	// (default) or "StreamGenerateContent". The server fills it in.
	Method string
	// Message replaces the default error message (or the default
	// API_KEY_INVALID / quota message) when set.
	Message string
	// Status replaces the HTTP status of an error kind (and the Gemini
	// body's error.code), e.g. 502 or 503 for NoCodeJSON, EmptyBody or
	// HugeBody, whose default is 500. Kinds that answer 200 ignore it.
	Status int
	// RetryDelay is the wait advertised by RateLimited and QuotaExhausted
	// (default 37.38s). The message ends "Please retry in 37.38s."; the
	// google.rpc.RetryInfo carries whole seconds ("37s") as the real API
	// does, or the exact value with its fraction ("0.250s") when it is under
	// one second, so that short test delays survive.
	RetryDelay time.Duration
	// RetryAfter is the Retry-After header value sent by the Gemini
	// endpoints on RateLimited, QuotaExhausted and Unavailable; empty means
	// no header, which is what the real Gemini API does. It is sent verbatim
	// (seconds or an HTTP date).
	RetryAfter string
	// OmitRetryAfter stops the OpenAI endpoint from sending Retry-After and
	// retry-after-ms. By default it sends them on RateLimited and
	// Unavailable: RetryAfter when set, else RetryDelay (seconds rounded up,
	// and milliseconds).
	OmitRetryAfter bool
	// NoQuota makes RateLimited the RESOURCE_EXHAUSTED that names no quota
	// of the caller's: "Resource has been exhausted (e.g. check quota).",
	// without QuotaFailure or RetryInfo, as the Gemini API and Vertex AI
	// answer when shared capacity sheds load. A delay then comes only from
	// RetryAfter.
	NoQuota bool
	// QuotaValue is the quota limit named by RateLimited (default "10") and
	// QuotaExhausted (default "250").
	QuotaValue string
	// InputTokens and TokenLimit are N and M in TokenLimit's message
	// (defaults: M = 1048576, N = M+1).
	InputTokens, TokenLimit int
	// BodySize is the size in bytes of HugeBody's body (default 10 MiB).
	BodySize int
	// CutAfter is how many chunks StreamCut writes before it drops the
	// connection (default 1; 0 chunks is not expressible, use Drop).
	CutAfter int
	// StallFor is how long Stall holds the request before answering
	// normally; zero holds it until the client gives up.
	StallFor time.Duration
	// Text is the answer text of MalformedJSON (default
	// `{"answer": "this JSON is cut off`).
	Text string
}

// Latency is a delay distribution: Fixed plus a uniform draw in
// [0, Jitter), or, when Func is set, Func of a uniform draw u in [0,1)
// taken from the server's seeded generator (Fixed and Jitter are then
// ignored). The zero Latency is no delay.
type Latency struct {
	// Fixed is the constant part.
	Fixed time.Duration
	// Jitter is the width of the uniform part.
	Jitter time.Duration
	// Func, when set, maps a uniform draw to a delay (an inverse CDF). It
	// is called concurrently.
	Func func(u float64) time.Duration
}

func (l Latency) draw(rng *rand.Rand) time.Duration {
	switch {
	case l.Func != nil:
		return max(0, l.Func(rng.Float64()))
	case l.Jitter > 0:
		return l.Fixed + time.Duration(rng.Int64N(int64(l.Jitter)))
	default:
		return l.Fixed
	}
}

// Request is what a [Reply] sees of a generation request.
type Request struct {
	// Model is the model id, without "models/".
	Model string
	// Prompt is the text of every part of every content (system instruction
	// first), joined by newlines. For the OpenAI endpoint: the messages'
	// text contents.
	Prompt string
	// JSON reports that the client asked for JSON output
	// (generationConfig.responseMimeType "application/json" or a response
	// schema; OpenAI response_format json_object or json_schema).
	JSON bool
	// Stream reports a streamGenerateContent request.
	Stream bool
	// OpenAI reports a request to the chat completions endpoint.
	OpenAI bool
	// N is the request's number for its model (from 1).
	N int64
}

// Reply returns the answer text of a successful request. It may be called
// concurrently.
type Reply func(Request) string

// Text returns a Reply that always answers s.
func Text(s string) Reply { return func(Request) string { return s } }

// JSON returns a Reply that always answers v encoded as JSON. It panics if v
// cannot be encoded.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("fakegemini.JSON: %v", err))
	}
	s := string(b)
	return func(Request) string { return s }
}

func defaultReply(r Request) string {
	p := []rune(r.Prompt)
	if len(p) > 64 {
		p = p[:64]
	}
	if r.JSON {
		b, _ := json.Marshal(struct {
			Model  string `json:"model"`
			Answer string `json:"answer"`
		}{r.Model, string(p)})
		return string(b)
	}
	return "answer from " + r.Model + ": " + string(p)
}

// Validate reports a script that cannot run: a rule with an unknown kind,
// Success or Canceled as kind, a probability outside [0,1], a window that
// ends before it starts, or negative counts or delays.
func (s Script) Validate() error {
	var errs []error
	for i, r := range s.Rules {
		switch {
		case !r.Kind.Valid():
			errs = append(errs, fmt.Errorf("rule %d: unknown kind %q", i, r.Kind))
		case r.Kind == Success || r.Kind == Canceled:
			errs = append(errs, fmt.Errorf("rule %d: kind %q cannot be injected", i, r.Kind))
		}
		if r.P < 0 || r.P > 1 || math.IsNaN(r.P) {
			errs = append(errs, fmt.Errorf("rule %d: probability %v outside [0,1]", i, r.P))
		}
		if !r.From.IsZero() && !r.Until.IsZero() && r.Until.Before(r.From) {
			errs = append(errs, fmt.Errorf("rule %d: window ends before it starts", i))
		}
		if r.FirstN < 0 || r.Every < 0 || r.Params.CutAfter < 0 || r.Params.BodySize < 0 || r.Params.StallFor < 0 {
			errs = append(errs, fmt.Errorf("rule %d: negative count or duration", i))
		}
	}
	if s.Chunks < 0 || s.ChunkDelay < 0 || s.Latency.Fixed < 0 || s.Latency.Jitter < 0 ||
		s.FaultLatency.Fixed < 0 || s.FaultLatency.Jitter < 0 {
		errs = append(errs, errors.New("negative chunk count or delay"))
	}
	return errors.Join(errs...)
}

// clone copies the rule slice so that the caller may reuse its own.
func (s Script) clone() Script {
	s.Rules = append([]Rule(nil), s.Rules...)
	return s
}

// pick returns the first rule that fires for request n, made with key, at
// time now.
func (s *Script) pick(n int64, key string, now time.Time, rng *rand.Rand) (Rule, bool) {
	for _, r := range s.Rules {
		if r.Key != "" && r.Key != key {
			continue
		}
		if !r.From.IsZero() && now.Before(r.From) {
			continue
		}
		if !r.Until.IsZero() && !now.Before(r.Until) {
			continue
		}
		if r.FirstN > 0 && n > int64(r.FirstN) {
			continue
		}
		if r.Every > 0 && n%int64(r.Every) != 0 {
			continue
		}
		if r.P <= 0 {
			continue
		}
		if r.P >= 1 || rng.Float64() < r.P {
			return r, true
		}
	}
	return Rule{}, false
}
