package gemini

import (
	"bufio"
	"context"
	"errors"
	"iter"
	"strings"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// Errors for streams that the genai SDK could not read. The SDK reports
// them as plain errors whose text quotes the offending line, which may hold
// part of the answer; Tier.Stream replaces them with these, wrapped with
// classify.Wrap as Transient: the transport, not the model, is at fault,
// and the next attempt usually reads cleanly.
var (
	// ErrStreamComment: the stream carried an SSE comment line, such as
	// ": keepalive". Servers and proxies send them to keep a quiet
	// connection open, and the SSE specification says to skip them, but
	// genai v1.77.0 fails the stream on one. Before the first chunk the
	// chain retries or moves to the next tier; after it the stream is
	// incomplete.
	ErrStreamComment = errors.New("gemini: SSE comment line in stream (the genai SDK cannot skip it)")
	// ErrMalformedChunk: a stream event the SDK could not decode.
	ErrMalformedChunk = errors.New("gemini: malformed stream chunk")
)

var _ fallback.StreamTier[string, Answer] = (*Tier[string])(nil)

// StreamStage returns a fallback stream stage for the tier with Model and
// Provider filled in; add the guards you want (Breaker, Retry,
// FirstChunkTimeout, IdleTimeout, Validate) to it.
func (t *Tier[In]) StreamStage() fallback.StreamStage[In, Answer] {
	return fallback.StreamStage[In, Answer]{Tier: t, Model: t.model, Provider: t.provider}
}

// Inspect describes a chunk to a fallback.StreamChain: the text it adds and
// its finish reason.
func (t *Tier[In]) Inspect(a Answer) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: a.Text, FinishReason: string(a.FinishReason)}
}

// ChunkUsage returns the token usage a streamed chunk carries (Gemini sends
// it with the last chunk), making the tier a fallback.ChunkUsageReporter.
func (t *Tier[In]) ChunkUsage(a Answer) (fallback.Usage, bool) { return a.Usage, a.HasUsage }

// Stream makes one GenerateContentStream request for in (one HTTP request,
// with the SDK's retries and, unless TierConfig.Continuation is set, its
// automatic continuation off) when the sequence is ranged over. It makes
// Tier a fallback.StreamTier[In, Answer]: each chunk is an Answer whose
// Text is the text that chunk adds, with the chunk's finish reason, usage
// and SDK response.
//
// Errors classify as for Call, with what streaming adds:
//
//   - an error response before the stream starts is a *ResponseError, with
//     the Retry-After headers a Transport captured; an error event inside
//     the stream ({"error":{...}} after the 200) is a *ResponseError too,
//     classified from its code, status and details;
//   - a connection cut mid-stream is the SDK's bare io.ErrUnexpectedEOF or
//     *net.OpError, wrapped with the model's name: Transient;
//   - an SSE comment line is ErrStreamComment, an undecodable event
//     ErrMalformedChunk: Transient, with no upstream text in the error;
//   - a blocked prompt or a safety finish reason is Safety (*BlockedError),
//     a CONTINUATION finish reason with continuation off InvalidOutput
//     (ErrContinuation, after the chunk's text);
//   - a clean close is no error, finish reason or not: the chain reports a
//     stream without one as incomplete (fallback.ErrNoFinishReason).
//
// A chunk without candidates before the first one with is skipped, so that
// the chain does not commit to a stream that has said nothing. Breaking out
// of the sequence, or ctx ending, closes the response body and with it the
// connection.
func (t *Tier[In]) Stream(ctx context.Context, in In) iter.Seq2[Answer, error] {
	return func(yield func(Answer, error) bool) {
		contents, cfg := t.request(in)
		ctx, capture := WithCapture(ctx)
		started := false
		for resp, err := range t.client.Models.GenerateContentStream(ctx, t.model, contents, cfg) {
			if err != nil {
				yield(Answer{}, t.streamError(capture, err))
				return
			}
			a, ok, err := t.chunk(resp)
			if ok || (started && err == nil) {
				started = true
				if !yield(a, nil) {
					return
				}
			}
			if err != nil {
				yield(Answer{}, err)
				return
			}
		}
	}
}

// chunk turns one streamed response into a chunk. ok is false for a
// response with nothing to show (no candidate); err ends the stream (after
// the chunk, when ok).
func (t *Tier[In]) chunk(resp *genai.GenerateContentResponse) (a Answer, ok bool, err error) {
	if resp == nil {
		return Answer{}, false, nil
	}
	if err := promptBlocked(resp); err != nil {
		return Answer{}, false, err
	}
	a = Answer{ModelVersion: resp.ModelVersion, Response: resp}
	a.Usage, a.HasUsage = usage(resp)
	if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		return a, false, nil
	}
	cand := resp.Candidates[0]
	if err := candidateBlocked(cand); err != nil {
		return Answer{}, false, err
	}
	a.Text = text(cand)
	switch cand.FinishReason {
	case genai.FinishReasonUnspecified:
	case genai.FinishReasonContinuation:
		// Only seen with continuation off: the SDK follows it otherwise.
		return a, true, classify.Wrap(ErrContinuation, classify.Verdict{Class: classify.InvalidOutput, Reason: "answer needs continuation"})
	default:
		a.FinishReason = cand.FinishReason
	}
	return a, true, nil
}

// streamError makes the SDK's stream errors classifiable and free of
// upstream text.
func (t *Tier[In]) streamError(capture *Capture, err error) error {
	if api, ok := apiError(err); ok {
		if re, ok := capture.Wrap(err).(*ResponseError); ok {
			// An error response before the stream began.
			return re
		}
		// An error event inside a 200 stream: no headers to add.
		return &ResponseError{Err: err, StatusCode: api.Code}
	}
	msg := err.Error()
	switch {
	case strings.HasPrefix(msg, "iterateResponseStream: invalid stream chunk: :"):
		// A line with an empty field name: an SSE comment.
		return classify.Wrap(ErrStreamComment, classify.Verdict{Class: classify.Transient, Reason: "SSE comment in stream"})
	case strings.HasPrefix(msg, "iterateResponseStream:"):
		return classify.Wrap(ErrMalformedChunk, classify.Verdict{Class: classify.Transient, Reason: "malformed stream chunk"})
	case errors.Is(err, bufio.ErrTooLong):
		return classify.Wrap(ErrMalformedChunk, classify.Verdict{Class: classify.InvalidOutput, Reason: "stream chunk too large"})
	}
	return &streamErr{model: t.model, err: err}
}

// streamErr names the model of a transport or context error.
type streamErr struct {
	model string
	err   error
}

func (e *streamErr) Error() string { return "gemini: " + e.model + " stream: " + e.err.Error() }
func (e *streamErr) Unwrap() error { return e.err }
