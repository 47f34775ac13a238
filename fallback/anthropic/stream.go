package anthropic

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
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
// its stop reason, and whether it starts a tool call, which commits the
// stream like text does.
func (t *Tier[In]) Inspect(a Answer) fallback.ChunkInfo {
	return fallback.ChunkInfo{Text: a.Text, FinishReason: a.StopReason, NonTextContent: a.toolUse}
}

// Stream makes one streaming Messages request for in (one HTTP request:
// the SDK's retries off) when the sequence is ranged over, making Tier a
// fallback.StreamTier[In, Answer]. Each chunk is an Answer whose Text is
// the text one text_delta adds; a chunk that starts a tool_use block has
// no text and commits the stream. Thinking deltas are not chunks.
//
// message_stop is the only clean end: the stop_reason of the stream's
// message_delta is held until it arrives, and the last chunk carries it
// (with the usage, id and model). A stream that closes without
// message_stop — cut after its message_delta, or before — ends without a
// stop reason, which the chain reports as incomplete (or, before any
// content, as a cut stream it retries or moves on from).
//
// Errors classify as for Call:
//
//   - an error response before the stream starts is a *ResponseError;
//   - an event: error inside the stream ({"type":"error","error":
//     {"type":"overloaded_error",...}} after the 200) is a *ResponseError
//     whose verdict its type gives (the 529 of overloaded_error:
//     Transient). Before the first text delta the chain retries or falls
//     back as for any failure before content; after it the stream ends as
//     a *fallback.IncompleteError with the text so far;
//   - stop_reason "refusal" ends the stream with ErrRefusal (Safety) as
//     soon as its message_delta arrives; a stream whose message_stop came
//     with nothing usable in it ends with ErrEmptyAnswer, and
//     "pause_turn" with ErrPauseTurn (InvalidOutput);
//   - an event the SDK cannot decode is ErrMalformedEvent (Transient). No
//     upstream text reaches any error.
//
// The usage is reported once, as the stream ends: message_start's, with
// message_delta's cumulative counts over it. Breaking out of the sequence,
// or ctx ending, closes the response body and with it the connection.
func (t *Tier[In]) Stream(ctx context.Context, in In) iter.Seq2[Answer, error] {
	return func(yield func(Answer, error) bool) {
		params := t.request(in)
		fallback.Report(ctx, sampling(&params))
		var httpResp *http.Response
		s := t.client.Messages.NewStreaming(ctx, params, options(ctx, &httpResp, false)...)
		defer s.Close()
		st := streamState{}
		defer func() {
			if st.got {
				fallback.Report(ctx, st.rep)
			}
		}()
		for s.Next() {
			a, show, err := st.event(s.Current())
			if show && !yield(a, nil) {
				return
			}
			if err != nil {
				yield(Answer{}, err)
				return
			}
			if st.stopped {
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(Answer{}, streamError(err, httpResp))
		}
	}
}

// streamState is what a stream has said so far.
type streamState struct {
	rep        fallback.Reply
	got        bool
	usage      usageCounts
	stopReason string
	content    bool
	stopped    bool
}

// usageCounts are Anthropic's counts as the stream reported them last.
type usageCounts struct {
	input, cacheWrite, cacheRead, output, thinking int64
}

// event reads one stream event: the chunk to show, if any, and the error
// that ends the stream.
func (st *streamState) event(ev sdk.MessageStreamEventUnion) (a Answer, show bool, err error) {
	switch ev.Type {
	case "message_start":
		m := ev.Message
		st.got = true
		st.rep.Response.ID, st.rep.Response.Model = m.ID, m.Model
		if u := m.Usage; u.JSON.InputTokens.Valid() || u.JSON.OutputTokens.Valid() {
			st.usage = usageCounts{u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens, u.OutputTokensDetails.ThinkingTokens}
			st.setUsage()
		}
	case "content_block_start":
		switch ev.ContentBlock.Type {
		case "tool_use", "server_tool_use":
			st.content = true
			return st.chunk(Answer{toolUse: true}), true, nil
		case "text":
			if ev.ContentBlock.Text != "" {
				st.content = st.content || strings.TrimSpace(ev.ContentBlock.Text) != ""
				return st.chunk(Answer{Text: ev.ContentBlock.Text}), true, nil
			}
		}
	case "content_block_delta":
		if ev.Delta.Type == "text_delta" && ev.Delta.Text != "" {
			st.content = st.content || strings.TrimSpace(ev.Delta.Text) != ""
			return st.chunk(Answer{Text: ev.Delta.Text}), true, nil
		}
	case "message_delta":
		st.got = true
		st.stopReason = string(ev.Delta.StopReason)
		st.rep.Response.FinishReason = st.stopReason
		// Cumulative counts: each one the event carries replaces the
		// earlier.
		u := ev.Usage
		if u.JSON.InputTokens.Valid() {
			st.usage.input = u.InputTokens
		}
		if u.JSON.CacheCreationInputTokens.Valid() {
			st.usage.cacheWrite = u.CacheCreationInputTokens
		}
		if u.JSON.CacheReadInputTokens.Valid() {
			st.usage.cacheRead = u.CacheReadInputTokens
		}
		if u.JSON.OutputTokens.Valid() {
			st.usage.output = u.OutputTokens
		}
		if u.JSON.OutputTokensDetails.Valid() {
			st.usage.thinking = u.OutputTokensDetails.ThinkingTokens
		}
		if u.JSON.InputTokens.Valid() || u.JSON.OutputTokens.Valid() || st.rep.HasUsage {
			st.setUsage()
		}
		if st.stopReason == string(sdk.StopReasonRefusal) {
			// A policy decision: no need to wait for message_stop.
			return Answer{}, false, stopped(st.stopReason, st.content)
		}
	case "message_stop":
		st.stopped = true
		if err := stopped(st.stopReason, st.content); err != nil {
			return Answer{}, false, err
		}
		return st.chunk(Answer{StopReason: st.stopReason}), true, nil
	}
	return Answer{}, false, nil
}

func (st *streamState) setUsage() {
	u := st.usage
	st.rep.Usage, st.rep.HasUsage = counts(u.input, u.cacheWrite, u.cacheRead, u.output, u.thinking), true
}

// chunk fills a chunk's id, model and usage from what the stream said.
func (st *streamState) chunk(a Answer) Answer {
	a.ID, a.Model = st.rep.Response.ID, st.rep.Response.Model
	a.Usage, a.HasUsage = st.rep.Usage, st.rep.HasUsage
	return a
}

// streamError makes a stream's error classifiable and free of upstream
// text: an error response before the stream, an error event inside it,
// or an event the SDK could not read.
func streamError(err error, resp *http.Response) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	var ae *sdk.Error
	if errors.As(err, &ae) && ae != nil {
		re, ok := responseError(err, resp).(*ResponseError)
		if !ok {
			return err
		}
		if f := re.Facts(); re.StatusCode == 0 && f.Code == "" && f.Status == "" {
			// An error event that is not Anthropic's error object: as far as
			// the stream goes, it broke.
			return classify.Wrap(ErrMalformedEvent, classify.Verdict{Class: classify.Transient, Reason: "error event in stream"})
		}
		return re
	}
	if v, ok := transportLike(err); ok {
		return v
	}
	// The SDK's other stream errors quote the event ("received error while
	// streaming: <data>", a JSON decoding error): never pass them on.
	return classify.Wrap(ErrMalformedEvent, classify.Verdict{Class: classify.Transient, Reason: "malformed stream event"})
}

// transportLike keeps a connection's failure as it is (Transient to the
// classifier, without upstream text): a cut, a reset, a timeout.
func transportLike(err error) (error, bool) {
	v := classify.Classify(err)
	if v.Class == classify.Transient {
		return err, true
	}
	return nil, false
}
