package oaicompat

import (
	"context"
	"errors"
	"iter"
	"net/http"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

var _ fallback.StreamTier[string, Answer] = (*Tier[string])(nil)

// StreamStage returns a fallback stream stage for the tier with Model and
// Provider filled in; add the guards you want to it.
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
// its finish reason, and whether it carries a tool call.
func (t *Tier[In]) Inspect(a Answer) fallback.ChunkInfo {
	info := fallback.ChunkInfo{Text: a.Text, FinishReason: a.FinishReason}
	info.NonTextContent = a.toolCall
	return info
}

// Stream makes one streaming chat completion request for in (one HTTP
// request: the SDK's retries off) when the sequence is ranged over, making
// Tier a fallback.StreamTier[In, Answer]. Each chunk is an Answer whose
// Text is the text that chunk adds (Response is nil; the chunk's id, model
// and usage are set).
//
// Errors classify as for Call: an error response before the stream starts
// is a *ResponseError; an error event inside the stream ({"error":{...}}
// after the 200, as OpenRouter and gateways send it) is one too, decoded
// with classify.ParseErrorBody — its message never reaches the error's
// text; an event whose only status is a string code ("server_error",
// "rate_limit_exceeded") classifies as the status that code stands for. A
// finish_reason does not end the stream: an error event after it makes
// the stream incomplete. A finish_reason of content_filter ends the stream with
// ErrContentFilter (Safety); a stream whose only finish came with nothing
// usable ends with ErrEmptyAnswer (InvalidOutput). SSE comments are skipped
// by openai-go itself.
func (t *Tier[In]) Stream(ctx context.Context, in In) iter.Seq2[Answer, error] {
	return func(yield func(Answer, error) bool) {
		params := t.prompt(in)
		params.Model = t.model
		fallback.Report(ctx, sampling(&params))
		var httpResp *http.Response
		s := t.client.Chat.Completions.NewStreaming(ctx, params, option.WithMaxRetries(0),
			option.WithResponseInto(&httpResp), option.WithMiddleware(limitErrorBody))
		defer s.Close()
		// What the chunks said of the completion (the usage comes with the
		// last one, with stream_options.include_usage), reported once as
		// the stream ends.
		var rep fallback.Reply
		got := false
		defer func() {
			if got {
				fallback.Report(ctx, rep)
			}
		}()
		content := false
		for s.Next() {
			ch := s.Current()
			a := Answer{Model: ch.Model, ID: ch.ID}
			a.Usage, a.HasUsage = usage(ch.Usage)
			got = true
			if a.HasUsage {
				rep.Usage, rep.HasUsage = a.Usage, true
			}
			if a.ID != "" {
				rep.Response.ID = a.ID
			}
			if a.Model != "" {
				rep.Response.Model = a.Model
			}
			if len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
				rep.Response.FinishReason = ch.Choices[0].FinishReason
			}
			if len(ch.Choices) > 0 {
				c := ch.Choices[0]
				a.Text = c.Delta.Content
				//lint:ignore SA1019 older OpenAI-compatible servers still stream function_call
				a.toolCall = len(c.Delta.ToolCalls) > 0 || c.Delta.FunctionCall.Name != ""
				content = content || strings.TrimSpace(a.Text) != "" || a.toolCall
				if c.FinishReason != "" {
					switch v := classify.FinishReason(c.FinishReason, content); v.Class {
					case classify.OK:
						a.FinishReason = c.FinishReason
					case classify.Safety:
						yield(Answer{}, classify.Wrap(ErrContentFilter, v))
						return
					default:
						if a.Text != "" && !yield(a, nil) {
							return
						}
						yield(Answer{}, classify.Wrap(ErrEmptyAnswer, v))
						return
					}
				}
			}
			if !yield(a, nil) {
				return
			}
		}
		if err := s.Err(); err != nil {
			yield(Answer{}, streamError(err, httpResp))
		}
	}
}

// streamError makes a stream's error classifiable and free of upstream
// text: an error event's data is decoded, not quoted.
func streamError(err error, resp *http.Response) error {
	var se *ssestream.StreamError
	if errors.As(err, &se) {
		f, ok := classify.ParseErrorBody(se.Event.Data)
		re := &ResponseError{Err: errStreamEvent, StatusCode: f.HTTPStatus, body: &parsedBody{facts: f, ok: ok}}
		if re.StatusCode == 0 && f.Status == "" && f.Code == "" {
			// No status to classify by: as far as the stream goes, it broke.
			return classify.Wrap(errStreamEvent, classify.Verdict{Class: classify.Transient, Reason: "error event in stream"})
		}
		return re
	}
	var oe *oai.Error
	if errors.As(err, &oe) {
		return responseError(err, resp)
	}
	return err
}

// errStreamEvent stands for an error event inside a 200 stream; the event's
// text stays out of every error string.
var errStreamEvent = errors.New("openai: error event in stream")
