package gemini

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"strings"

	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
)

// Answer is a Gemini tier's answer.
type Answer struct {
	// Text is the first candidate's text: its text parts, thoughts left
	// out, concatenated. Answers from a cache or a default fill only Text.
	Text string
	// FinishReason is the first candidate's finish reason (STOP,
	// MAX_TOKENS, ...). A tier never returns SAFETY-like reasons as an
	// answer; they are errors.
	FinishReason genai.FinishReason
	// ModelVersion is the model version that answered, as the API reports.
	ModelVersion string
	// Usage is the token usage the API reported: input is the prompt plus
	// tool-use prompt tokens, output the candidates plus thinking tokens.
	Usage fallback.Usage
	// HasUsage is set when the response carried usage metadata.
	HasUsage bool
	// Response is the SDK's whole response, for function calls, citations,
	// safety ratings and the like; nil for answers not from a tier.
	Response *genai.GenerateContentResponse
}

// PromptFunc builds one tier's request from the chain's input: the
// contents and an optional config (nil is fine). Each tier has its own, so
// a Flash prompt need not be the Pro prompt. It must not keep or share the
// returned config: the tier sets per-request options on a copy, not on it.
type PromptFunc[In any] func(in In) ([]*genai.Content, *genai.GenerateContentConfig)

// TierConfig configures a Tier.
type TierConfig[In any] struct {
	// Name is the tier's name in results, logs and metrics ("pro").
	// Required.
	Name string
	// Model is the model id ("gemini-2.5-pro"). Required.
	Model string
	// Client makes the calls. Build it with NewClient so that Retry-After
	// headers reach the classifier. Required.
	Client *genai.Client
	// Prompt builds the request from the chain's input. Required.
	Prompt PromptFunc[In]
	// Continuation lets the SDK follow a CONTINUATION finish reason with
	// further requests inside one attempt (genai's AutomaticContinuation).
	// Off by default: each continuation is another billed request that the
	// chain cannot see, count, time or retry, so one attempt would no longer
	// be one request. With it off, an answer that stops with CONTINUATION
	// is an InvalidOutput and the chain moves on.
	Continuation bool
}

// Tier is a fallback.ModelTier that calls client.Models.GenerateContent
// for one model. Every call makes exactly one HTTP request (unless
// Continuation is on):
//
//   - the SDK's own retries are off for its requests (HTTPOptions.
//     RetryOptions with Attempts 1, which overrides any the client was
//     built with), because the chain owns retrying: it knows the deadline,
//     the breaker and the retry budget, the SDK does not;
//   - automatic continuation is off (see TierConfig.Continuation);
//   - the genai Go SDK (v1.77.0) has no automatic function calling for
//     GenerateContent, so a function call comes back as the answer, for
//     you to execute and send in a new request.
//
// A 200 is not always an answer. Call returns an error that classifies as
// classify.FinishReason and classify.BlockReason say:
//
//   - Safety when promptFeedback.blockReason is set, or when the candidate
//     finished with SAFETY, PROHIBITED_CONTENT, BLOCKLIST, SPII,
//     IMAGE_SAFETY or IMAGE_PROHIBITED_CONTENT (a *BlockedError): a policy
//     decision the default table fails closed on;
//   - InvalidOutput, so that the next tier answers, when there is no
//     candidate (ErrNoCandidates), no finish reason (ErrNoFinishReason),
//     CONTINUATION with continuation off (ErrContinuation), RECITATION,
//     MALFORMED_FUNCTION_CALL, UNEXPECTED_TOOL_CALL, TOO_MANY_TOOL_CALLS,
//     LANGUAGE, OTHER, NO_IMAGE, IMAGE_OTHER or IMAGE_RECITATION (a
//     *FinishError), and when STOP or MAX_TOKENS came with nothing usable —
//     no text that is not blank, no function call, no data (a *FinishError:
//     a thinking budget that used up the output tokens looks like this).
//
// A successful empty answer never comes back.
//
// Error responses come back as a *ResponseError around the genai.APIError,
// carrying the Retry-After headers a Transport captured. Every response
// the API returned (a rejected or blocked one too) is reported to the
// chain with fallback.Report, so observers and a spend ledger see its
// token usage (cached and thinking tokens included), response id and model
// version; Tier implements fallback.EndpointReporter for the provider and
// the server.
type Tier[In any] struct {
	name         string
	model        string
	client       *genai.Client
	prompt       PromptFunc[In]
	continuation bool
	provider     string
	endpoint     fallback.Endpoint
	// clientRetries is set when the client was built with RetryOptions:
	// each request then overrides them.
	clientRetries bool
}

// NewTier returns a tier, or an error naming the missing fields.
func NewTier[In any](cfg TierConfig[In]) (*Tier[In], error) {
	var errs []error
	if cfg.Name == "" {
		errs = append(errs, errors.New("Name is required"))
	}
	if cfg.Model == "" {
		errs = append(errs, errors.New("Model is required"))
	}
	if cfg.Client == nil {
		errs = append(errs, errors.New("missing Client"))
	}
	if cfg.Prompt == nil {
		errs = append(errs, errors.New("missing Prompt"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, errors.New("gemini: invalid tier config: " + strings.ReplaceAll(err.Error(), "\n", "; "))
	}
	provider := "gcp.gemini"
	if cfg.Client.ClientConfig().Backend == genai.BackendVertexAI {
		provider = "gcp.vertex_ai"
	}
	ep := fallback.Endpoint{Provider: provider}
	ep.Address, ep.Port = server(cfg.Client.ClientConfig().HTTPOptions.BaseURL)
	return &Tier[In]{
		name: cfg.Name, model: cfg.Model, client: cfg.Client, prompt: cfg.Prompt,
		continuation: cfg.Continuation, provider: provider, endpoint: ep,
		clientRetries: cfg.Client.ClientConfig().HTTPOptions.RetryOptions != nil,
	}, nil
}

// server returns the host and port of the client's base URL (the SDK fills
// it in: generativelanguage.googleapis.com, or a Vertex AI location's
// endpoint), or "" and 0 when it cannot be read.
func server(baseURL string) (string, int) {
	u, err := url.Parse(baseURL)
	if err != nil || u.Hostname() == "" {
		return "", 0
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil {
			return u.Hostname(), 0
		}
		return u.Hostname(), n
	}
	switch u.Scheme {
	case "https":
		return u.Hostname(), 443
	case "http":
		return u.Hostname(), 80
	}
	return u.Hostname(), 0
}

// Endpoint reports the provider ("gcp.gemini" for the Gemini API,
// "gcp.vertex_ai" for Vertex AI) and the server the client calls
// (fallback.EndpointReporter), so that a stage built without Stage still
// names its provider.
func (t *Tier[In]) Endpoint() fallback.Endpoint { return t.endpoint }

// Name returns the tier's name.
func (t *Tier[In]) Name() string { return t.name }

// Model returns the model id.
func (t *Tier[In]) Model() string { return t.model }

// Stage returns a fallback stage for the tier with Model and Provider
// ("gcp.gemini", or "gcp.vertex_ai") filled in; add the guards you want
// (Breaker, Retry, TryTimeout, Validate) to it.
func (t *Tier[In]) Stage() fallback.Stage[In, Answer] {
	return fallback.Stage[In, Answer]{Tier: t, Model: t.model, Provider: t.provider}
}

var one int32 = 1

// noRetries makes one attempt; the SDK reads it and never writes it.
var noRetries = genai.HTTPRetryOptions{Attempts: &one}

// Call makes one GenerateContent request and checks the answer.
func (t *Tier[In]) Call(ctx context.Context, in In) (Answer, error) {
	contents, c := t.request(in)
	fallback.Report(ctx, sampling(c))
	ctx, capture := WithCapture(ctx)
	resp, err := t.client.Models.GenerateContent(ctx, t.model, contents, c)
	if err != nil {
		return Answer{}, capture.Wrap(err)
	}
	// The response was billed, whatever the checks below make of it.
	fallback.Report(ctx, reply(resp))
	return t.answer(resp)
}

// reply is what a response says about itself, for fallback.Report: its
// usage, id, model version and finish reason.
func reply(resp *genai.GenerateContentResponse) fallback.Reply {
	var r fallback.Reply
	if resp == nil {
		return r
	}
	r.Usage, r.HasUsage = usage(resp)
	r.Response = fallback.ResponseInfo{ID: resp.ResponseID, Model: resp.ModelVersion}
	if len(resp.Candidates) > 0 && resp.Candidates[0] != nil {
		r.Response.FinishReason = string(resp.Candidates[0].FinishReason)
	}
	return r
}

// streamed adds one chunk's reply to what a stream said so far: Gemini
// sends the usage so far with each chunk that has it, the last one whole.
func streamed(so fallback.Reply, chunk fallback.Reply) fallback.Reply {
	if chunk.HasUsage {
		so.Usage, so.HasUsage = chunk.Usage, true
	}
	if chunk.Response.ID != "" {
		so.Response.ID = chunk.Response.ID
	}
	if chunk.Response.Model != "" {
		so.Response.Model = chunk.Response.Model
	}
	if chunk.Response.FinishReason != "" {
		so.Response.FinishReason = chunk.Response.FinishReason
	}
	return so
}

// request builds the request for in: the prompt's contents, and a copy of
// its config with the SDK's retries off and continuation as configured.
// The SDK sets defaults on the config it is given, so it gets the copy.
func (t *Tier[In]) request(in In) ([]*genai.Content, *genai.GenerateContentConfig) {
	contents, cfg := t.prompt(in)
	var c genai.GenerateContentConfig
	if cfg != nil {
		c = *cfg
	}
	// genai retries only when RetryOptions is set, on the client or the
	// request: only then does the request carry its own, Attempts 1. A
	// request with HTTPOptions of its own costs the SDK a merge of the
	// options and about twenty allocations more.
	if t.clientRetries || (c.HTTPOptions != nil && c.HTTPOptions.RetryOptions != nil) {
		var h genai.HTTPOptions
		if c.HTTPOptions != nil {
			h = *c.HTTPOptions
		}
		h.RetryOptions = &noRetries
		c.HTTPOptions = &h
	}
	continuation := t.continuation
	c.AutomaticContinuation = &continuation
	return contents, &c
}

// usage reads a response's usage metadata.
func usage(resp *genai.GenerateContentResponse) (fallback.Usage, bool) {
	u := resp.UsageMetadata
	if u == nil {
		return fallback.Usage{}, false
	}
	// The prompt count includes the cached content; the thoughts are
	// output the model spent reasoning.
	r := fallback.Usage{
		InputTokens:           int64(u.PromptTokenCount) + int64(u.ToolUsePromptTokenCount),
		OutputTokens:          int64(u.CandidatesTokenCount) + int64(u.ThoughtsTokenCount),
		CacheReadInputTokens:  int64(u.CachedContentTokenCount),
		ReasoningOutputTokens: int64(u.ThoughtsTokenCount),
	}
	// The input is the prompt and the tool-use prompt, so both breakdowns
	// count. The candidates' breakdown leaves the thoughts out: the API
	// does not say their modality, and they stay uncounted by modality.
	for _, m := range u.PromptTokensDetails {
		addInput(&r, m)
	}
	for _, m := range u.ToolUsePromptTokensDetails {
		addInput(&r, m)
	}
	for _, m := range u.CandidatesTokensDetails {
		addOutput(&r, m)
	}
	return r, true
}

// addInput adds one modality's count to u's input breakdown. A modality
// the API leaves unspecified, or one this version does not know, is left
// out: its tokens stay in InputTokens, of no known modality.
func addInput(u *fallback.Usage, m *genai.ModalityTokenCount) {
	if m == nil {
		return
	}
	n := int64(m.TokenCount)
	switch m.Modality {
	case genai.MediaModalityText:
		u.TextInputTokens += n
	case genai.MediaModalityImage:
		u.ImageInputTokens += n
	case genai.MediaModalityAudio:
		u.AudioInputTokens += n
	case genai.MediaModalityVideo:
		u.VideoInputTokens += n
	case genai.MediaModalityDocument:
		u.DocumentInputTokens += n
	}
}

// addOutput adds one modality's count to u's output breakdown, as
// addInput does for the input. Usage has no video or document output:
// generateContent answers in text, images and audio.
func addOutput(u *fallback.Usage, m *genai.ModalityTokenCount) {
	if m == nil {
		return
	}
	n := int64(m.TokenCount)
	switch m.Modality {
	case genai.MediaModalityText:
		u.TextOutputTokens += n
	case genai.MediaModalityImage:
		u.ImageOutputTokens += n
	case genai.MediaModalityAudio:
		u.AudioOutputTokens += n
	}
}

// sampling is what the request's config says of its sampling, for
// fallback.Report: maxOutputTokens, temperature and topP, the numbers the
// caller chose (never the prompt).
func sampling(c *genai.GenerateContentConfig) fallback.Reply {
	var r fallback.Reply
	if c == nil {
		return r
	}
	r.RequestMaxTokens = int64(c.MaxOutputTokens)
	if c.Temperature != nil {
		r.RequestTemperature, r.HasTemperature = float64(*c.Temperature), true
	}
	if c.TopP != nil {
		r.RequestTopP, r.HasTopP = float64(*c.TopP), true
	}
	return r
}

// promptBlocked returns the Safety error for a response whose prompt was
// blocked, or nil.
func promptBlocked(resp *genai.GenerateContentResponse) error {
	pf := resp.PromptFeedback
	if pf == nil {
		return nil
	}
	if v := classify.BlockReason(string(pf.BlockReason)); v.Class != classify.OK {
		return classify.Wrap(&BlockedError{BlockReason: pf.BlockReason}, v)
	}
	return nil
}

// finished returns the error a candidate's finish reason makes of a 200,
// or nil when the answer stands: classify.FinishReason decides, from the
// reason and whether anything usable came with it (in a stream, in any
// chunk so far).
func finished(reason genai.FinishReason, hasContent bool) error {
	v := classify.FinishReason(string(reason), hasContent)
	switch v.Class {
	case classify.OK:
		return nil
	case classify.Safety:
		return classify.Wrap(&BlockedError{FinishReason: reason}, v)
	}
	switch reason {
	case "", genai.FinishReasonUnspecified:
		return classify.Wrap(ErrNoFinishReason, v)
	case genai.FinishReasonContinuation:
		return classify.Wrap(ErrContinuation, v)
	}
	return classify.Wrap(&FinishError{FinishReason: reason}, v)
}

// answer turns a 200 into an Answer, or into the error it really is.
func (t *Tier[In]) answer(resp *genai.GenerateContentResponse) (Answer, error) {
	if resp == nil {
		return Answer{}, classify.Wrap(ErrNoCandidates, classify.Verdict{Class: classify.InvalidOutput, Reason: "empty response"})
	}
	a := Answer{ModelVersion: resp.ModelVersion, Response: resp}
	a.Usage, a.HasUsage = usage(resp)
	if err := promptBlocked(resp); err != nil {
		return Answer{}, err
	}
	if len(resp.Candidates) == 0 || resp.Candidates[0] == nil {
		return Answer{}, classify.Wrap(ErrNoCandidates, classify.Verdict{Class: classify.InvalidOutput, Reason: "no candidates"})
	}
	cand := resp.Candidates[0]
	a.FinishReason = cand.FinishReason
	reason := cand.FinishReason
	if (reason == "" || reason == genai.FinishReasonUnspecified) && len(cand.ContinuationToken) > 0 {
		reason = genai.FinishReasonContinuation
	}
	if err := finished(reason, hasContent(cand)); err != nil {
		return Answer{}, err
	}
	a.Text = text(cand)
	return a, nil
}

// hasContent reports whether a candidate carries anything usable: text
// that is not blank, a function call, inline or file data, code or its
// result. Thoughts do not count.
func hasContent(c *genai.Candidate) bool {
	if c == nil || c.Content == nil {
		return false
	}
	for _, p := range c.Content.Parts {
		if partContent(p) {
			return true
		}
	}
	return false
}

func partContent(p *genai.Part) bool {
	if p == nil || p.Thought {
		return false
	}
	return strings.TrimSpace(p.Text) != "" || nonText(p)
}

// nonText reports whether a part carries content other than text.
func nonText(p *genai.Part) bool {
	return p.FunctionCall != nil || p.InlineData != nil || p.FileData != nil ||
		p.ExecutableCode != nil || p.CodeExecutionResult != nil || p.FunctionResponse != nil
}

// text concatenates a candidate's text parts, thoughts left out. Unlike
// GenerateContentResponse.Text it logs nothing.
func text(c *genai.Candidate) string {
	if c.Content == nil {
		return ""
	}
	var b strings.Builder
	for _, p := range c.Content.Parts {
		if p != nil && !p.Thought {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
