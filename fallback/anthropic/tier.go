package anthropic

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// Provider is the provider name the tiers report to observers by default:
// "anthropic", the value of gen_ai.provider.name that the OpenTelemetry
// GenAI semantic conventions give Anthropic's API.
const Provider = "anthropic"

// Answer is a Claude tier's answer.
type Answer struct {
	// Text is the message's text: its text blocks, in order, joined.
	// Thinking is not part of it. Answers from a cache or a default fill
	// only Text.
	Text string
	// StopReason is the message's stop_reason ("end_turn",
	// "stop_sequence", "tool_use", "max_tokens"); never "refusal" or
	// "pause_turn", which are errors.
	StopReason string
	// Model is the model that answered, as the API reports.
	Model string
	// ID is the message's id ("msg_…"), as the API reports.
	ID string
	// Usage is the token usage the API reported: InputTokens counts the
	// whole prompt (Anthropic's input_tokens plus the tokens written to
	// and read from the cache), CacheWriteInputTokens and
	// CacheReadInputTokens its cached parts, ReasoningOutputTokens the
	// thinking part of OutputTokens.
	Usage fallback.Usage
	// HasUsage is set when the response carried usage.
	HasUsage bool
	// Message is the SDK's whole message (tool calls, thinking,
	// citations, ...); nil for answers not from a tier, and for streamed
	// chunks.
	Message *sdk.Message

	// toolUse is set on a streamed chunk that starts a tool call.
	toolUse bool
}

// PromptFunc builds one tier's request from the chain's input. Each tier
// has its own. The tier sets Model; whatever the function puts there is
// replaced. MaxTokens is the API's: set it.
type PromptFunc[In any] func(in In) sdk.MessageNewParams

// TierConfig configures a Tier.
type TierConfig[In any] struct {
	// Name is the tier's name in results, logs and metrics ("claude").
	// Required.
	Name string
	// Model is the model id ("claude-sonnet-5-5"). Required.
	Model string
	// Client makes the calls. Build it with NewClient, or with
	// anthropic.NewClient: the tier turns the SDK's retries off per
	// request either way. Required.
	Client *sdk.Client
	// Prompt builds the request from the chain's input. Required.
	Prompt PromptFunc[In]
	// Provider names the API for observers (gen_ai.provider.name);
	// Provider ("anthropic") by default. Set it for Claude served by
	// another platform ("aws.bedrock", "gcp.vertex_ai", ...).
	Provider string
}

// Tier is a fallback.ModelTier (and a fallback.StreamTier) over
// Anthropic's Messages API for one model. Every call makes exactly one
// HTTP request: it passes option.WithMaxRetries(0), because
// anthropic-sdk-go (v2.17.0) otherwise retries twice on 408, 409, 429,
// 5xx and connection errors, honouring retry-after — a wait the chain's
// deadline knows nothing about. The chain owns retrying.
//
// A 200 is not always an answer. Call returns an error that classifies as
// classify.FinishReason says of the stop_reason:
//
//   - Safety when the model refused (stop_reason "refusal", ErrRefusal),
//     with or without text before it; the default class table fails
//     closed;
//   - InvalidOutput when nothing usable came (no text that is not blank
//     and no tool call) whatever the stop reason — "max_tokens" spent on
//     thinking looks like this — (ErrEmptyAnswer), when the stop reason
//     is missing (ErrNoStopReason), and for "pause_turn" (ErrPauseTurn): a
//     server-tool turn the API paused, which goes on only if the caller
//     sends the message back; the tier does not, so the next tier answers.
//
// Error responses come back as a *ResponseError around the SDK's error.
// Every message the server returned (a refused one too) is reported to the
// chain with fallback.Report — its usage, id, model and stop reason; Tier
// implements fallback.EndpointReporter.
//
// The SDK's own OpenTelemetry spans stay metadata-only on every request
// the tier makes (option.WithOpenTelemetryTracesContentMode), whatever
// ANTHROPIC_OPEN_TELEMETRY_TRACES_CONTENT_MODE says: no prompt or answer
// reaches a span through the tier.
type Tier[In any] struct {
	name     string
	model    string
	client   *sdk.Client
	prompt   PromptFunc[In]
	provider string
}

var _ fallback.ModelTier[string, Answer] = (*Tier[string])(nil)

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
		return nil, errors.New("anthropic: invalid tier config: " + strings.Join(missing, ", ") + " required")
	}
	if cfg.Provider == "" {
		cfg.Provider = Provider
	}
	return &Tier[In]{name: cfg.Name, model: cfg.Model, client: cfg.Client, prompt: cfg.Prompt, provider: cfg.Provider}, nil
}

// NewClient is anthropic.NewClient with the SDK's retries off
// (option.WithMaxRetries(0) after opts). Tier turns them off per request
// anyway; a client made here also keeps your own calls, such as a model
// listing, from retrying behind the chain's back.
func NewClient(opts ...option.RequestOption) sdk.Client {
	return sdk.NewClient(append(opts[:len(opts):len(opts)], option.WithMaxRetries(0))...)
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

// Endpoint reports the provider (TierConfig.Provider, "anthropic" by
// default) for observers (fallback.EndpointReporter). The server is not
// reported: the client's options do not tell it.
func (t *Tier[In]) Endpoint() fallback.Endpoint { return fallback.Endpoint{Provider: t.provider} }

// request builds the request for in, with the tier's model.
func (t *Tier[In]) request(in In) sdk.MessageNewParams {
	params := t.prompt(in)
	params.Model = t.model
	return params
}

// options are the request options of every call: one HTTP request (the
// chain retries), the response kept for its status and headers, error
// bodies capped, the SDK's spans without content, and — for a unary call
// — the request's deadline as the SDK's own timeout, so that its
// estimate from max_tokens neither cuts the call short nor refuses it.
func options(ctx context.Context, resp **http.Response, unary bool) []option.RequestOption {
	opts := []option.RequestOption{
		option.WithMaxRetries(0),
		option.WithResponseInto(resp),
		option.WithMiddleware(limitErrorBody),
		option.WithOpenTelemetryTracesContentMode(option.OpenTelemetryContentModeMetadataOnly),
	}
	if dl, ok := ctx.Deadline(); ok && unary {
		if d := time.Until(dl); d > 0 {
			opts = append(opts, option.WithRequestTimeout(d))
		}
	}
	return opts
}

// sampling is what the request's parameters say of its sampling, for
// fallback.Report: max_tokens (a number the caller chose, never the
// prompt). anthropic-sdk-go v2.17.0's request has no temperature or top_p.
func sampling(p *sdk.MessageNewParams) fallback.Reply {
	return fallback.Reply{RequestMaxTokens: p.MaxTokens}
}

// usage reads a message's usage. Anthropic's input_tokens counts only the
// prompt's tokens after the last cache breakpoint; the tokens written to
// the cache and read from it are counted apart
// (https://docs.anthropic.com/en/docs/build-with-claude/prompt-caching:
// total input = input_tokens + cache_creation_input_tokens +
// cache_read_input_tokens). fallback.Usage counts the whole prompt in
// InputTokens, with the cached parts inside it.
func usage(u sdk.Usage) (fallback.Usage, bool) {
	if !u.JSON.InputTokens.Valid() && !u.JSON.OutputTokens.Valid() {
		return fallback.Usage{}, false
	}
	return counts(u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens, u.OutputTokens, u.OutputTokensDetails.ThinkingTokens), true
}

// counts puts Anthropic's counts into a fallback.Usage; negative counts
// (a hostile or broken server) count as 0.
func counts(input, cacheWrite, cacheRead, output, thinking int64) fallback.Usage {
	input, cacheWrite, cacheRead, output = max(input, 0), max(cacheWrite, 0), max(cacheRead, 0), max(output, 0)
	return fallback.Usage{
		InputTokens:           input + cacheWrite + cacheRead,
		OutputTokens:          output,
		CacheWriteInputTokens: cacheWrite,
		CacheReadInputTokens:  cacheRead,
		ReasoningOutputTokens: min(max(thinking, 0), output),
	}
}

// Call makes one Messages request and checks the answer. The request's
// deadline is the SDK's timeout for the call; without one,
// anthropic-sdk-go applies its own (10 minutes) and refuses outright a
// max_tokens it expects to take longer — give the chain a Total, or
// stream.
func (t *Tier[In]) Call(ctx context.Context, in In) (Answer, error) {
	params := t.request(in)
	fallback.Report(ctx, sampling(&params))
	var httpResp *http.Response
	msg, err := t.client.Messages.New(ctx, params, options(ctx, &httpResp, true)...)
	if err != nil {
		return Answer{}, responseError(err, httpResp)
	}
	if msg != nil {
		// Billed, whatever the checks below make of it.
		rep := fallback.Reply{Response: fallback.ResponseInfo{ID: msg.ID, Model: msg.Model, FinishReason: string(msg.StopReason)}}
		rep.Usage, rep.HasUsage = usage(msg.Usage)
		fallback.Report(ctx, rep)
	}
	return answer(msg)
}

// usable reports whether a message's content carries an answer: text that
// is not blank, or a tool call.
func usable(blocks []sdk.ContentBlockUnion) (text string, ok bool) {
	var b strings.Builder
	for _, c := range blocks {
		switch c.Type {
		case "text":
			b.WriteString(c.Text)
			ok = ok || strings.TrimSpace(c.Text) != ""
		case "tool_use", "server_tool_use":
			ok = true
		}
	}
	return b.String(), ok
}

func answer(msg *sdk.Message) (Answer, error) {
	if msg == nil {
		return Answer{}, classify.Wrap(ErrEmptyAnswer, classify.Verdict{Class: classify.InvalidOutput, Reason: "no message"})
	}
	a := Answer{Model: msg.Model, ID: msg.ID, StopReason: string(msg.StopReason), Message: msg}
	a.Usage, a.HasUsage = usage(msg.Usage)
	text, content := usable(msg.Content)
	if err := stopped(a.StopReason, content); err != nil {
		return Answer{}, err
	}
	a.Text = text
	return a, nil
}

// stopped judges a stop reason against what the message carried: nil for
// an answer, else the error the 200 really is.
func stopped(reason string, content bool) error {
	v := classify.FinishReason(reason, content)
	switch {
	case v.Class == classify.OK:
		return nil
	case v.Class == classify.Safety:
		return classify.Wrap(ErrRefusal, v)
	case reason == "":
		return classify.Wrap(ErrNoStopReason, v)
	case reason == string(sdk.StopReasonPauseTurn):
		return classify.Wrap(ErrPauseTurn, v)
	}
	return classify.Wrap(ErrEmptyAnswer, v)
}
