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
	// ": keepalive", and the client was not built with NewClient, whose
	// Transport removes them. Servers and proxies send them to keep a
	// quiet connection open, and the SSE specification says to skip them,
	// but genai v1.77.0 fails the stream on one. Before the first chunk the
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

// TextStreamStage is StreamStage over the tier's text view
// (fallback.TextStream): its chunks are fallback.TextChunks, with each
// Answer in Source, so that this tier and tiers over other SDKs share one
// stream chain without a chunk type of your own.
func (t *Tier[In]) TextStreamStage() fallback.StreamStage[In, fallback.TextChunk] {
	return fallback.StreamStage[In, fallback.TextChunk]{Tier: fallback.TextStream[In, Answer](t), Model: t.model, Provider: t.provider}
}

// Inspect describes a chunk to a fallback.StreamChain: the text it adds,
// its finish reason, and whether it carries content other than text (a
// function call, data), which commits the stream like text does.
func (t *Tier[In]) Inspect(a Answer) fallback.ChunkInfo {
	info := fallback.ChunkInfo{Text: a.Text, FinishReason: string(a.FinishReason)}
	if r := a.Response; r != nil && len(r.Candidates) > 0 && r.Candidates[0] != nil && r.Candidates[0].Content != nil {
		for _, p := range r.Candidates[0].Content.Parts {
			if p != nil && !p.Thought && nonText(p) {
				info.NonTextContent = true
				break
			}
		}
	}
	return info
}

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
//     the stream ({"error":{...}} after the 200, such as the 499 CANCELLED
//     or 503 Gemini sends under load) is a *ResponseError too, classified
//     from its code, status and details;
//   - a connection cut mid-stream is the SDK's bare io.ErrUnexpectedEOF or
//     *net.OpError, wrapped with the model's name: Transient;
//   - SSE comment lines (": keepalive") never reach the SDK when the client
//     was built with NewClient (its Transport removes them); without it
//     they are ErrStreamComment. An undecodable event is ErrMalformedChunk:
//     Transient, with no upstream text in the error;
//   - the finish reason of the last chunk is judged by
//     classify.FinishReason against everything the stream carried: a
//     safety stop is a *BlockedError (Safety; that chunk is not shown), a
//     RECITATION, a malformed function call, or a STOP with nothing usable
//     in the whole stream is a *FinishError or ErrContinuation
//     (InvalidOutput, after the chunk's text). Past the chain's commit
//     point it makes the stream incomplete, never complete;
//   - a finish reason does not end the stream: Vertex AI puts STOP on every
//     chunk, so the chunks after it are read, and an error event after it
//     makes the stream incomplete in the chain;
//   - a clean close is no error, finish reason or not: the chain reports a
//     stream without one as incomplete (fallback.ErrNoFinishReason), or,
//     when nothing usable came, as cut (fallback.ErrEmptyStream, Transient).
//
// A chunk without candidates before the first one with is skipped.
// Breaking out of the sequence, or ctx ending, closes the response body and
// with it the connection.
func (t *Tier[In]) Stream(ctx context.Context, in In) iter.Seq2[Answer, error] {
	return func(yield func(Answer, error) bool) {
		contents, cfg := t.request(in)
		fallback.Report(ctx, sampling(cfg))
		ctx, capture := WithCapture(ctx)
		started, content := false, false
		// What the chunks said of the response, reported once as the
		// stream ends: a cut stream was billed for what it sent.
		var rep fallback.Reply
		got := false
		defer func() {
			if got {
				fallback.Report(ctx, rep)
			}
		}()
		for resp, err := range t.client.Models.GenerateContentStream(ctx, t.model, contents, cfg) {
			if err != nil {
				yield(Answer{}, t.streamError(capture, err))
				return
			}
			rep, got = streamed(rep, reply(resp)), true
			a, show, err := t.chunk(resp, &content)
			if show || (started && err == nil) {
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

// chunk turns one streamed response into a chunk. show is false for a
// response with nothing to show (no candidate, or a safety stop); err ends
// the stream (after the chunk, when show). content records whether any
// chunk so far carried something usable.
func (t *Tier[In]) chunk(resp *genai.GenerateContentResponse, content *bool) (a Answer, show bool, err error) {
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
	a.Text = text(cand)
	*content = *content || hasContent(cand)
	reason := cand.FinishReason
	if reason == "" || reason == genai.FinishReasonUnspecified {
		return a, true, nil
	}
	a.FinishReason = reason
	if err := finished(reason, *content); err != nil {
		var blocked *BlockedError
		if errors.As(err, &blocked) {
			return Answer{}, false, err
		}
		a.FinishReason = ""
		return a, a.Text != "", err
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
