package gemrest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/validate"
)

// Defaults applied to zero fields of Config.
const (
	// DefaultBaseURL is the Gemini API's endpoint.
	DefaultBaseURL = "https://generativelanguage.googleapis.com"
	// DefaultAPIVersion is the API version in request paths.
	DefaultAPIVersion = "v1beta"
	// DefaultMaxResponseBytes bounds a success body: 8 MiB, far above any
	// real answer (65,536 output tokens are about 300 KB of JSON).
	DefaultMaxResponseBytes = 8 << 20
)

// Config configures a Client.
type Config struct {
	// BaseURL is the API's scheme and host, without the version:
	// DefaultBaseURL, or a fakegemini server's URL. Empty means
	// DefaultBaseURL.
	BaseURL string
	// APIVersion is "v1beta" or "v1". Empty means DefaultAPIVersion.
	APIVersion string
	// APIKey is sent in the x-goog-api-key header, never in the URL, so it
	// cannot appear in a *url.Error. Empty sends no key.
	APIKey string
	// Model is the model id, "gemini-2.5-pro" (a "models/" prefix is
	// accepted). Required.
	Model string
	// Name is the tier's name in results, logs and metrics. Empty means
	// Model.
	Name string
	// HTTPClient makes the requests. nil means http.DefaultClient. Leave its
	// Timeout at zero: the chain gives every attempt a context deadline.
	// The Client uses a copy that does not follow redirects: the API key
	// header would follow them to any host, and one Call must stay one
	// request. A redirect is returned as an error (classified Unknown).
	HTTPClient *http.Client
	// MaxResponseBytes bounds a success body, and each line and event of a
	// stream; a larger one fails with ErrResponseTooLarge. 0 means
	// DefaultMaxResponseBytes.
	MaxResponseBytes int64
}

// Request is one generateContent request: a single user turn.
type Request struct {
	// Prompt is the user's text. Required.
	Prompt string
	// System is an optional system instruction.
	System string
	// JSON asks for a JSON answer (generationConfig.responseMimeType
	// "application/json"). Validate it with validate.JSON or
	// validate.Decode: the model may still answer malformed JSON.
	JSON bool
	// MaxOutputTokens caps the answer's length; 0 leaves the model's
	// default.
	MaxOutputTokens int
}

// Response is a generateContent answer.
type Response struct {
	// Text is the first candidate's text, its parts joined, thought parts
	// left out.
	Text string
	// FinishReason is the candidate's finish reason: "STOP", "MAX_TOKENS",
	// ... (never a safety reason: those are errors).
	FinishReason string
	// ModelVersion is the model that answered, as the server reports it.
	ModelVersion string
	// ResponseID is the server's id for the answer.
	ResponseID string
	// Usage is the token usage from usageMetadata; OutputTokens includes
	// a thinking model's thought tokens, which are billed as output.
	Usage fallback.Usage
	// HasUsage reports that the answer carried usageMetadata.
	HasUsage bool
}

// ErrPromptBlocked is matched (errors.Is) by the error for a 200 whose
// promptFeedback has a blockReason. It classifies as classify.Safety.
var ErrPromptBlocked = errors.New("gemrest: prompt blocked")

// ErrAnswerBlocked is matched by the error for a 200 whose candidate
// stopped for a safety or policy reason (SAFETY, PROHIBITED_CONTENT,
// BLOCKLIST, SPII, IMAGE_SAFETY). It classifies as classify.Safety.
var ErrAnswerBlocked = errors.New("gemrest: answer blocked")

// ErrResponseTooLarge is matched by the error for a success body larger
// than Config.MaxResponseBytes. It classifies as classify.InvalidOutput.
var ErrResponseTooLarge = errors.New("gemrest: response body too large")

// safetyFinish are the finish reasons that mean a policy stopped the
// answer.
var safetyFinish = map[string]string{
	"SAFETY":             "SAFETY",
	"PROHIBITED_CONTENT": "PROHIBITED_CONTENT",
	"BLOCKLIST":          "BLOCKLIST",
	"SPII":               "SPII",
	"IMAGE_SAFETY":       "IMAGE_SAFETY",
}

// blockReasons interns the promptFeedback.blockReason values, so that error
// strings carry this package's constants, never bytes from a response.
var blockReasons = map[string]string{
	"SAFETY":             "SAFETY",
	"OTHER":              "OTHER",
	"BLOCKLIST":          "BLOCKLIST",
	"PROHIBITED_CONTENT": "PROHIBITED_CONTENT",
	"IMAGE_SAFETY":       "IMAGE_SAFETY",
}

// Client calls one Gemini model over REST. It is a
// fallback.ModelTier[Request, Response] (Call) and a
// fallback.StreamTier[Request, Chunk] (Stream), and reports each
// response's usage to the chain with fallback.Report. It is safe for
// concurrent use.
type Client struct {
	name     string
	model    string
	genURL   string
	sseURL   string
	listURL  string
	apiKey   string
	http     *http.Client
	maxBytes int64
	// op and streamOp prefix errors: "gemrest: gemini-2.5-pro
	// generateContent", "gemrest: gemini-2.5-pro streamGenerateContent".
	op       string
	streamOp string
}

var _ fallback.ModelTier[Request, Response] = (*Client)(nil)

// New returns a client for cfg, or an error naming every invalid field.
func New(cfg Config) (*Client, error) {
	var errs []error
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	base, err := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	switch {
	case err != nil:
		errs = append(errs, errors.New("BaseURL is not a URL"))
	case base.Scheme != "http" && base.Scheme != "https" || base.Host == "":
		errs = append(errs, errors.New("BaseURL must be an absolute http or https URL"))
	case base.RawQuery != "" || base.Fragment != "" || base.User != nil:
		errs = append(errs, errors.New("BaseURL must not carry a query, fragment or user info"))
	}
	if cfg.APIVersion == "" {
		cfg.APIVersion = DefaultAPIVersion
	}
	if strings.ContainsAny(cfg.APIVersion, "/?#") {
		errs = append(errs, fmt.Errorf("APIVersion %q is not a path segment", cfg.APIVersion))
	}
	model := strings.TrimPrefix(cfg.Model, "models/")
	if model == "" {
		errs = append(errs, errors.New("Model is required"))
	}
	if cfg.MaxResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("MaxResponseBytes must not be negative, got %d", cfg.MaxResponseBytes))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("gemrest: invalid config: %w", err)
	}
	if cfg.Name == "" {
		cfg.Name = model
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = http.DefaultClient
	}
	hc := *cfg.HTTPClient // shares the Transport and its connections
	hc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	if cfg.MaxResponseBytes == 0 {
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	root := base.String() + "/" + cfg.APIVersion
	modelURL := root + "/models/" + url.PathEscape(model)
	return &Client{
		name:     cfg.Name,
		model:    model,
		genURL:   modelURL + ":generateContent",
		sseURL:   modelURL + ":streamGenerateContent?alt=sse",
		listURL:  root + "/models",
		apiKey:   cfg.APIKey,
		http:     &hc,
		maxBytes: cfg.MaxResponseBytes,
		op:       "gemrest: " + model + " generateContent",
		streamOp: "gemrest: " + model + " streamGenerateContent",
	}, nil
}

// Name returns the tier's name (Config.Name, or the model id).
func (c *Client) Name() string { return c.name }

// Model returns the model id, without "models/": what fallback.Stage.Model
// wants for catalog preflight.
func (c *Client) Model() string { return c.model }

// Call makes exactly one generateContent request for req, under ctx. See
// the package documentation for how its errors classify.
func (c *Client) Call(ctx context.Context, req Request) (Response, error) {
	if strings.TrimSpace(req.Prompt) == "" {
		return Response{}, classify.Wrap(errors.New(c.op+": empty prompt"),
			classify.Verdict{Class: classify.InvalidRequest, Reason: "empty prompt"})
	}
	body, err := json.Marshal(wireBody(req))
	if err != nil {
		// Strings and ints always marshal; keep the error free of the prompt.
		return Response{}, classify.Wrap(errors.New(c.op+": cannot encode the request"),
			classify.Verdict{Class: classify.InvalidRequest, Reason: "request not encodable"})
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.genURL, bytes.NewReader(body))
	if err != nil {
		return Response{}, fmt.Errorf("%s: %w", c.op, err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	c.auth(hreq)

	resp, err := c.http.Do(hreq)
	if err != nil {
		// A *url.Error: the URL holds the model, never the key (a header).
		return Response{}, fmt.Errorf("%s: %w", c.op, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return Response{}, c.statusError(ctx, resp)
	}
	raw, err := c.readBody(resp.Body)
	if err != nil {
		return Response{}, err
	}
	return c.parse(ctx, raw)
}

func (c *Client) auth(r *http.Request) {
	r.Header.Set("User-Agent", "tierguard-gemrest")
	if c.apiKey != "" {
		r.Header.Set("x-goog-api-key", c.apiKey)
	}
}

func wireBody(req Request) wireRequest {
	w := wireRequest{Contents: []wireContent{{Role: "user", Parts: []wirePart{{Text: req.Prompt}}}}}
	if req.System != "" {
		w.SystemInstruction = &wireContent{Parts: []wirePart{{Text: req.System}}}
	}
	if req.JSON || req.MaxOutputTokens > 0 {
		w.GenerationConfig = &wireGenConfig{MaxOutputTokens: max(req.MaxOutputTokens, 0)}
		if req.JSON {
			w.GenerationConfig.ResponseMimeType = "application/json"
		}
	}
	return w
}

// statusError reads a failed response with classify.ReadResponse. The
// *classify.HTTPError it wraps names only the status; the upstream message
// stays in its Facts.
func (c *Client) statusError(ctx context.Context, resp *http.Response) error {
	he := classify.ReadResponse(ctx, resp)
	// Drain a little so a small remainder does not cost the connection; a
	// huge body is left unread and the connection closed with it.
	_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
	return fmt.Errorf("%s: %w", c.op, he)
}

// readBody reads a success body of at most c.maxBytes.
func (c *Client) readBody(body io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(body, c.maxBytes+1))
	if err != nil {
		// io.ErrUnexpectedEOF for a connection dropped mid-body (Transient),
		// or the context's error when the attempt's deadline ended.
		return nil, fmt.Errorf("%s: reading response: %w", c.op, err)
	}
	if int64(len(raw)) > c.maxBytes {
		return nil, fmt.Errorf("%s: %w", c.op, &validate.Error{
			Rule: "max_response_bytes", Reason: "body larger than " + strconv.FormatInt(c.maxBytes, 10) + " bytes",
			Err: ErrResponseTooLarge,
		})
	}
	return raw, nil
}

// parse turns a success body into a Response, or into the Safety,
// InvalidOutput or Transient error it stands for.
func (c *Client) parse(ctx context.Context, raw []byte) (Response, error) {
	var w wireResponse
	if err := json.Unmarshal(raw, &w); err != nil {
		return Response{}, malformed(c.op, err)
	}
	// The response was billed, whatever is wrong with it below.
	fallback.Report(ctx, w.reply())
	if err := c.promptBlocked(&w); err != nil {
		return Response{}, err
	}
	if len(w.Candidates) == 0 {
		return Response{}, fmt.Errorf("%s: %w", c.op, &validate.Error{Rule: "gemini_response", Reason: "no candidates"})
	}
	cand := &w.Candidates[0]
	if err := c.answerBlocked(cand); err != nil {
		return Response{}, err
	}
	if cand.FinishReason == "" {
		return Response{}, fmt.Errorf("%s: %w", c.op, &validate.Error{Rule: "gemini_response", Reason: "no finish reason: the answer may be incomplete"})
	}
	out := Response{FinishReason: cand.FinishReason, ModelVersion: w.ModelVersion, ResponseID: w.ResponseID, Text: cand.text()}
	out.Usage, out.HasUsage = w.usage()
	return out, nil
}

// malformed is the Transient error for a 200 body (or stream event) that
// is not the JSON of a GenerateContentResponse. The json error may quote a
// byte of the body: only the offset is reported.
func malformed(op string, err error) error {
	reason := "malformed response body"
	var se *json.SyntaxError
	switch {
	case errors.As(err, &se):
		reason += " at offset " + strconv.FormatInt(se.Offset, 10)
	case err != nil:
		reason += ": not a GenerateContentResponse"
	}
	return classify.Wrap(errors.New(op+": "+reason),
		classify.Verdict{Class: classify.Transient, HTTPStatus: http.StatusOK, Reason: "malformed response body"})
}

// promptBlocked returns the Safety error for a response whose prompt was
// blocked, or nil.
func (c *Client) promptBlocked(w *wireResponse) error {
	if w.PromptFeedback == nil || w.PromptFeedback.BlockReason == "" {
		return nil
	}
	why, ok := blockReasons[w.PromptFeedback.BlockReason]
	if !ok {
		why = "OTHER"
	}
	return classify.Wrap(fmt.Errorf("%w (%s, block reason %s)", ErrPromptBlocked, c.model, why),
		classify.Verdict{Class: classify.Safety, HTTPStatus: http.StatusOK, Reason: "prompt blocked"})
}

// answerBlocked returns the Safety error for a candidate that a policy
// stopped, or nil.
func (c *Client) answerBlocked(cand *wireCandidate) error {
	why, ok := safetyFinish[cand.FinishReason]
	if !ok {
		return nil
	}
	return classify.Wrap(fmt.Errorf("%w (%s, finish reason %s)", ErrAnswerBlocked, c.model, why),
		classify.Verdict{Class: classify.Safety, HTTPStatus: http.StatusOK, Reason: "answer blocked"})
}

// text joins a candidate's parts, thought parts left out.
func (cand *wireCandidate) text() string {
	if cand.Content == nil {
		return ""
	}
	var text strings.Builder
	for _, p := range cand.Content.Parts {
		if !p.Thought {
			text.WriteString(p.Text)
		}
	}
	return text.String()
}

// usage reads usageMetadata; OutputTokens includes thought tokens.
// reply is what the response reports about itself, for fallback.Report.
func (w *wireResponse) reply() fallback.Reply {
	r := fallback.Reply{Response: fallback.ResponseInfo{ID: w.ResponseID, Model: w.ModelVersion}}
	if len(w.Candidates) > 0 {
		r.Response.FinishReason = w.Candidates[0].FinishReason
	}
	r.Usage, r.HasUsage = w.usage()
	return r
}

func (w *wireResponse) usage() (fallback.Usage, bool) {
	u := w.UsageMetadata
	if u == nil {
		return fallback.Usage{}, false
	}
	return fallback.Usage{
		InputTokens: u.PromptTokenCount, OutputTokens: u.CandidatesTokenCount + u.ThoughtsTokenCount,
		CacheReadInputTokens: u.CachedContentTokenCount, ReasoningOutputTokens: u.ThoughtsTokenCount,
	}, true
}
