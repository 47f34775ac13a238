package oaicompat

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/respjson"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// Answer is an OpenAI-compatible tier's answer.
type Answer struct {
	// Text is the first choice's message content. Answers from a cache or a
	// default fill only Text.
	Text string
	// FinishReason is the first choice's finish_reason ("stop", "length",
	// "tool_calls"); never "content_filter", which is an error.
	FinishReason string
	// Model is the model that answered, as the API reports.
	Model string
	// ID is the completion's id ("chatcmpl-…"), as the API reports.
	ID string
	// Usage is the token usage the API reported.
	Usage fallback.Usage
	// HasUsage is set when the response carried usage.
	HasUsage bool
	// Response is the SDK's whole response (tool calls, logprobs, ...); nil
	// for answers not from a tier, and for streamed chunks.
	Response *oai.ChatCompletion

	// toolCall is set on a streamed chunk that carries a tool call.
	toolCall bool
}

// PromptFunc builds one tier's chat completion request from the chain's
// input. Each tier has its own. The tier sets Model; whatever the function
// puts there is replaced.
type PromptFunc[In any] func(in In) oai.ChatCompletionNewParams

// TierConfig configures a Tier.
type TierConfig[In any] struct {
	// Name is the tier's name in results, logs and metrics ("gpt").
	// Required.
	Name string
	// Model is the model id the gateway serves ("gpt-4o-mini"). Required.
	Model string
	// Client makes the calls. Build it with NewClient, or with
	// openai.NewClient: the tier turns the SDK's retries off per request
	// either way. Required.
	Client *oai.Client
	// Prompt builds the request from the chain's input. Required.
	Prompt PromptFunc[In]
	// Provider names the API for observers (gen_ai.provider.name); "openai"
	// by default. Set it for other gateways ("azure.ai.openai",
	// "gcp.gemini", ...).
	Provider string
}

// Tier is a fallback.ModelTier over the chat completions endpoint of
// OpenAI or any OpenAI-compatible gateway. Every call makes exactly one
// HTTP request: it passes option.WithMaxRetries(0), because openai-go
// (v3.99.0) otherwise retries twice on 408, 409, 429, 5xx and connection
// errors, honouring Retry-After up to two minutes — a wait the chain's
// deadline knows nothing about. The chain owns retrying.
//
// A 200 is not always an answer. Call returns an error that classifies as
// classify.FinishReason says:
//
//   - Safety when the choice finished with content_filter
//     (ErrContentFilter) or the model refused (ErrRefusal); the default
//     class table fails closed;
//   - InvalidOutput when there is no choice (ErrNoChoices), no
//     finish_reason (ErrNoFinishReason), or nothing usable — no content
//     that is not blank and no tool call — whatever the finish reason
//     (ErrEmptyAnswer; "length" with nothing in it looks like this);
//   - as its embedded code says when a 200 without choices carries an
//     error object ({"error":{"code":502,...}}, as OpenRouter sends once
//     the model has started): a *ResponseError whose StatusCode is that
//     code, so a 5xx or a 429 is retried and counts for the breaker.
//
// Error responses come back as a *ResponseError around the SDK's error.
// Every completion the server returned (a refused or rejected one too) is
// reported to the chain with fallback.Report — its usage, id, model and
// finish reason; Tier implements fallback.EndpointReporter.
type Tier[In any] struct {
	name     string
	model    string
	client   *oai.Client
	prompt   PromptFunc[In]
	provider string
}

// NewTier returns a tier, or an error naming the missing fields.
func NewTier[In any](cfg TierConfig[In]) (*Tier[In], error) {
	var missing []string
	if cfg.Name == "" {
		missing = append(missing, "Name")
	}
	if cfg.Model == "" {
		missing = append(missing, "Model")
	}
	if cfg.Client == nil {
		missing = append(missing, "Client")
	}
	if cfg.Prompt == nil {
		missing = append(missing, "Prompt")
	}
	if len(missing) > 0 {
		return nil, errors.New("openai: invalid tier config: " + strings.Join(missing, ", ") + " required")
	}
	if cfg.Provider == "" {
		cfg.Provider = "openai"
	}
	return &Tier[In]{name: cfg.Name, model: cfg.Model, client: cfg.Client, prompt: cfg.Prompt, provider: cfg.Provider}, nil
}

// NewClient is openai.NewClient with the SDK's retries off
// (option.WithMaxRetries(0) after opts). Tier turns them off per request
// anyway; a client made here also keeps your own calls, such as a model
// listing, from retrying behind the chain's back.
func NewClient(opts ...option.RequestOption) oai.Client {
	return oai.NewClient(append(opts[:len(opts):len(opts)], option.WithMaxRetries(0))...)
}

// Name returns the tier's name.
func (t *Tier[In]) Name() string { return t.name }

// Model returns the model id.
func (t *Tier[In]) Model() string { return t.model }

// Stage returns a fallback stage for the tier with Model and Provider
// filled in; add the guards you want to it.
func (t *Tier[In]) Stage() fallback.Stage[In, Answer] {
	return fallback.Stage[In, Answer]{Tier: t, Model: t.model, Provider: t.provider}
}

// usage reads a response's usage, with the cached and reasoning tokens the
// API details (both are parts of the prompt and completion counts).
func usage(u oai.CompletionUsage) (fallback.Usage, bool) {
	if !u.JSON.PromptTokens.Valid() && !u.JSON.CompletionTokens.Valid() {
		return fallback.Usage{}, false
	}
	// The details by modality are parts of the counts: text, audio and
	// image tokens of the prompt, text and audio of the completion. A
	// server that leaves them out reports 0, and the counts stay of no
	// known modality.
	return fallback.Usage{
		InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		CacheReadInputTokens:  u.PromptTokensDetails.CachedTokens,
		CacheWriteInputTokens: u.PromptTokensDetails.CacheWriteTokens,
		ReasoningOutputTokens: u.CompletionTokensDetails.ReasoningTokens,
		TextInputTokens:       u.PromptTokensDetails.TextTokens,
		AudioInputTokens:      u.PromptTokensDetails.AudioTokens,
		ImageInputTokens:      u.PromptTokensDetails.ImageTokens,
		TextOutputTokens:      u.CompletionTokensDetails.TextTokens,
		AudioOutputTokens:     u.CompletionTokensDetails.AudioTokens,
		// Not in OpenAI's schema, but sent by compatible servers that
		// generate images (Gemini's OpenAI endpoint, gateways before it).
		ImageOutputTokens: extraCount(u.CompletionTokensDetails.JSON.ExtraFields, "image_tokens"),
	}, true
}

// extraCount reads a count the SDK's schema does not name from a
// response's extra fields; 0 when absent or not a whole number.
func extraCount(extra map[string]respjson.Field, key string) int64 {
	// The SDK keeps a field its schema lacks with its raw text (and as not
	// Valid, since it has no type to check it against).
	f, ok := extra[key]
	if !ok || f.Raw() == "" || f.Raw() == respjson.Null {
		return 0
	}
	n, err := strconv.ParseInt(strings.TrimSpace(f.Raw()), 10, 64)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// sampling is what the request's parameters say of its sampling, for
// fallback.Report: max_completion_tokens (or the older max_tokens),
// temperature and top_p, the numbers the caller chose (never the prompt).
func sampling(p *oai.ChatCompletionNewParams) fallback.Reply {
	var r fallback.Reply
	r.RequestMaxTokens = p.MaxCompletionTokens.Or(p.MaxTokens.Or(0))
	if p.Temperature.Valid() {
		r.RequestTemperature, r.HasTemperature = p.Temperature.Value, true
	}
	if p.TopP.Valid() {
		r.RequestTopP, r.HasTopP = p.TopP.Value, true
	}
	return r
}

// Endpoint reports the provider (TierConfig.Provider, "openai" by
// default) for observers (fallback.EndpointReporter), so that a stage
// built without Stage still names its provider. The server is not
// reported: the client's options do not tell it.
func (t *Tier[In]) Endpoint() fallback.Endpoint { return fallback.Endpoint{Provider: t.provider} }

// Call makes one chat completion request and checks the answer.
func (t *Tier[In]) Call(ctx context.Context, in In) (Answer, error) {
	params := t.prompt(in)
	params.Model = t.model
	fallback.Report(ctx, sampling(&params))
	var httpResp *http.Response
	resp, err := t.client.Chat.Completions.New(ctx, params, option.WithMaxRetries(0), option.WithResponseInto(&httpResp), option.WithMiddleware(limitErrorBody))
	if err != nil {
		return Answer{}, responseError(err, httpResp)
	}
	if resp != nil {
		// Billed, whatever the checks below make of it.
		rep := fallback.Reply{Response: fallback.ResponseInfo{ID: resp.ID, Model: resp.Model}}
		rep.Usage, rep.HasUsage = usage(resp.Usage)
		if len(resp.Choices) > 0 {
			rep.Response.FinishReason = resp.Choices[0].FinishReason
		}
		fallback.Report(ctx, rep)
	}
	return answer(resp)
}

func answer(resp *oai.ChatCompletion) (Answer, error) {
	if resp == nil || len(resp.Choices) == 0 {
		if err := bodyError(resp); err != nil {
			return Answer{}, err
		}
		return Answer{}, classify.Wrap(ErrNoChoices, classify.Verdict{Class: classify.InvalidOutput, Reason: "no choices"})
	}
	a := Answer{Model: resp.Model, ID: resp.ID, Response: resp}
	a.Usage, a.HasUsage = usage(resp.Usage)
	ch := resp.Choices[0]
	a.FinishReason = ch.FinishReason
	if ch.Message.Refusal != "" && ch.Message.Content == "" {
		return Answer{}, classify.Wrap(ErrRefusal, classify.Verdict{Class: classify.Safety, Reason: "model refused"})
	}
	//lint:ignore SA1019 older OpenAI-compatible servers still answer with function_call
	content := strings.TrimSpace(ch.Message.Content) != "" || len(ch.Message.ToolCalls) > 0 || ch.Message.FunctionCall.Name != ""
	switch v := classify.FinishReason(ch.FinishReason, content); {
	case v.Class == classify.OK:
	case v.Class == classify.Safety:
		return Answer{}, classify.Wrap(ErrContentFilter, v)
	case ch.FinishReason == "":
		return Answer{}, classify.Wrap(ErrNoFinishReason, v)
	default:
		return Answer{}, classify.Wrap(ErrEmptyAnswer, v)
	}
	a.Text = ch.Message.Content
	return a, nil
}
