// Package corpus loads the conformance corpus: real responses of LLM APIs,
// quoted from public sources, each with the verdict and the chain action the
// library owes it. The classifier's tests, and the SDK adapters' tests that
// serve each body to the real SDK over httptest, run every case; see
// testdata/README.md for the file format and the sources.
package corpus

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

//go:embed testdata/*.txt
var files embed.FS

// Case is one real response and what the library must make of it.
type Case struct {
	// Name is the file's name without ".txt".
	Name string
	// Source is where the response was quoted; Note what the quote is.
	Source, SourceNote string
	// Provider, API and Transport describe the response ("gemini-api",
	// "generateContent", "unary" or "sse").
	Provider, API, Transport string
	// Status is the HTTP status and Header the headers the source quotes.
	Status int
	Header http.Header
	// Truncated says whether the source (or the corpus) kept only part of
	// the body; BodyForm how the body was transcribed.
	Truncated bool
	BodyForm  string
	// Body is the response body.
	Body []byte
	// FinishReason and BlockReason are set for 200s that carry them.
	FinishReason, BlockReason string

	// Class is the expected class's name ("rate_limited"), RetryAfter the
	// expected delay (0 for none), Action the expected chain action
	// ("retry", "next_tier", "park_quota", "park_retired", "fail_closed",
	// "answer") and Model the model a retired case names.
	Class      string
	RetryAfter time.Duration
	Action     string
	Model      string
	// ExpectNote says which rule gives the expectation.
	ExpectNote string
}

// Stream reports whether the body is an event stream.
func (c Case) Stream() bool { return c.Transport == "sse" }

// OpenAIShaped reports whether the provider speaks OpenAI's chat
// completions API (so the openai-go adapter is the SDK path).
func (c Case) OpenAIShaped() bool {
	switch c.Provider {
	case "openai", "azure-openai", "vllm", "deepseek", "openrouter", "groq", "mistral", "other-openai-compatible", "gemini-openai-compat":
		return true
	}
	return false
}

// AnthropicShaped reports whether the provider speaks Anthropic's Messages
// API (so the anthropic-sdk-go adapter is the SDK path).
func (c Case) AnthropicShaped() bool { return c.Provider == "anthropic" }

// GeminiShaped reports whether the provider speaks the Gemini API (so the
// genai adapter is the SDK path).
func (c Case) GeminiShaped() bool {
	switch c.Provider {
	case "gemini-api", "vertex-ai", "gemini-code-assist":
		return true
	}
	return false
}

// All returns every case, sorted by name.
func All() ([]Case, error) {
	names, err := fs.Glob(files, "testdata/*.txt")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	cases := make([]Case, 0, len(names))
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		c, err := parse(strings.TrimSuffix(path.Base(name), ".txt"), raw)
		if err != nil {
			return nil, fmt.Errorf("corpus: %s: %w", name, err)
		}
		cases = append(cases, c)
	}
	return cases, nil
}

var classes = map[string]bool{
	"transient": true, "rate_limited": true, "quota_exhausted": true, "retired": true, "context_too_long": true,
	"invalid_request": true, "auth": true, "safety": true, "invalid_output": true, "ok": true,
}

var actions = map[string]bool{
	"retry": true, "next_tier": true, "park_quota": true, "park_retired": true, "fail_closed": true, "answer": true,
}

func parse(name string, raw []byte) (Case, error) {
	head, body, ok := bytes.Cut(raw, []byte("\n---\n"))
	if !ok {
		return Case{}, fmt.Errorf("no --- line")
	}
	c := Case{Name: name, Header: http.Header{}, Body: body}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(head), "\n") {
		key, value, ok := strings.Cut(line, ": ")
		if !ok {
			return Case{}, fmt.Errorf("malformed header line %q", line)
		}
		if seen[key] && key != "header" {
			return Case{}, fmt.Errorf("%s given twice", key)
		}
		seen[key] = true
		var err error
		switch key {
		case "source":
			c.Source = value
		case "source-note":
			c.SourceNote = value
		case "provider":
			c.Provider = value
		case "api":
			c.API = value
		case "transport":
			if value != "unary" && value != "sse" {
				err = fmt.Errorf("transport %q", value)
			}
			c.Transport = value
		case "status":
			c.Status, err = strconv.Atoi(value)
		case "header":
			k, v, ok := strings.Cut(value, ": ")
			if !ok {
				err = fmt.Errorf("header %q", value)
			}
			c.Header.Add(k, v)
		case "truncated":
			c.Truncated = value != "no"
		case "body-form":
			c.BodyForm = value
		case "finish-reason":
			c.FinishReason = value
		case "block-reason":
			c.BlockReason = value
		case "expect-class":
			if !classes[value] {
				err = fmt.Errorf("class %q", value)
			}
			c.Class = value
		case "expect-retry-after":
			if value != "none" {
				c.RetryAfter, err = time.ParseDuration(value)
			}
		case "expect-action":
			if !actions[value] {
				err = fmt.Errorf("action %q", value)
			}
			c.Action = value
		case "expect-model":
			c.Model = value
		case "expect-note":
			c.ExpectNote = value
		default:
			err = fmt.Errorf("unknown field %q", key)
		}
		if err != nil {
			return Case{}, err
		}
	}
	for _, required := range []string{"source", "provider", "transport", "status", "expect-class", "expect-action"} {
		if !seen[required] {
			return Case{}, fmt.Errorf("missing %s", required)
		}
	}
	if !strings.HasPrefix(c.Source, "https://") {
		return Case{}, fmt.Errorf("source %q is not a public URL", c.Source)
	}
	return c, nil
}

// ResponseBody is the body to serve for the case. Where the source quoted
// only the error's message (body-form "reconstructed-from-message" and a
// body that is neither JSON nor HTML), the message is put back into the
// provider's error envelope — Google's {"error":{"code":..,"message":..}}
// or OpenAI's {"error":{"message":..}} — so that a client sees what the
// server sent around it. Every other body is served as quoted.
func (c Case) ResponseBody() []byte {
	trimmed := bytes.TrimSpace(c.Body)
	if !strings.HasPrefix(c.BodyForm, "reconstructed-from-message") || len(trimmed) == 0 ||
		trimmed[0] == '{' || trimmed[0] == '[' || trimmed[0] == '<' || c.Stream() {
		return c.Body
	}
	msg, _ := json.Marshal(string(trimmed))
	if c.OpenAIShaped() {
		return []byte(`{"error":{"message":` + string(msg) + `,"type":null,"param":null,"code":null}}`)
	}
	return []byte(`{"error":{"code":` + strconv.Itoa(c.Status) + `,"message":` + string(msg) + `}}`)
}

// Handler serves the case as its server sent it: the quoted headers, the
// status and ResponseBody, with the Content-Type of the body's form
// (jsonType for JSON). When streamed reports that a request asked for a
// stream (nil: never), a 200 answer quoted as JSON is served as one
// server-sent event, as the streaming endpoint would send it.
func (c Case) Handler(jsonType string, streamed func(*http.Request) bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body := c.ResponseBody()
		for k, vs := range c.Header {
			w.Header()[k] = vs
		}
		switch {
		case c.Stream():
			w.Header().Set("Content-Type", "text/event-stream")
		case c.Status == http.StatusOK && streamed != nil && streamed(r):
			w.Header().Set("Content-Type", "text/event-stream")
			var compact bytes.Buffer
			if json.Compact(&compact, body) == nil {
				body = append(append([]byte("data: "), compact.Bytes()...), "\n\n"...)
			}
		case bytes.HasPrefix(bytes.TrimSpace(body), []byte("<")):
			w.Header().Set("Content-Type", "text/html; charset=UTF-8")
		default:
			w.Header().Set("Content-Type", jsonType)
		}
		w.WriteHeader(c.Status)
		_, _ = w.Write(body)
	})
}
