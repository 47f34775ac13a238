package classify_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/internal/testbed/corpus"
)

// TestCorpusRawPath classifies every real response of the conformance
// corpus the way a client without an SDK would: classify.ReadResponse on an
// error response, classify.BlockReason and classify.FinishReason on a 200,
// and, for event streams, each event in turn. The SDK adapters' tests run
// the same cases through genai and openai-go.
func TestCorpusRawPath(t *testing.T) {
	cases, err := corpus.All()
	require.NoError(t, err)
	table := classify.DefaultTable()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			v := rawVerdict(t, c)
			assert.Equal(t, c.Class, className(v.Class), "%v\nsource: %s\nrule: %s", v, c.Source, c.ExpectNote)
			assert.Equal(t, c.RetryAfter, v.RetryAfter, "retry-after of %v", v)
			if c.Class == "retired" {
				assert.Equal(t, c.Model, v.Model, "the model the 404 names")
			}
			assert.Equal(t, c.Action, actionName(table, v), "%v", v)
			assert.NotContains(t, v.String(), "\n")
		})
	}
}

// TestPerMinuteQuotaFromRealPayloads: a 429 whose QuotaFailure names a
// per-minute quota says so (Verdict.PerMinute), which takes a tier out for
// every request; the bare RESOURCE_EXHAUSTED that Gemini, Vertex AI and
// the OpenAI-compatible endpoint send without naming any quota does not,
// and no verdict of another class does.
func TestPerMinuteQuotaFromRealPayloads(t *testing.T) {
	cases, err := corpus.All()
	require.NoError(t, err)
	want := map[string]bool{
		"gemini-api-per-minute-input-tokens-429":            true,
		"gemini-api-resource-exhausted-429-wrapper":         false,
		"gemini-openai-compat-resource-exhausted-429-array": false,
		"vertex-ai-resource-exhausted-429-array":            false,
		"gemini-code-assist-resource-exhausted-429-array":   false,
		"gemini-api-per-day-and-per-minute-429-limit-0":     false,
	}
	seen := 0
	for _, c := range cases {
		v := rawVerdict(t, c)
		if w, ok := want[c.Name]; ok {
			seen++
			assert.Equal(t, w, v.PerMinute, "%s: %v\nsource: %s", c.Name, v, c.Source)
		}
		if v.PerMinute {
			assert.Equal(t, classify.RateLimited, v.Class, "%s: only a rate limit names a per-minute quota", c.Name)
		}
	}
	assert.Equal(t, len(want), seen, "every named case is in the corpus")
	v := classify.Classify(classify.ReadResponse(context.Background(), response(429, body429)))
	assert.True(t, v.PerMinute, "GenerateRequestsPerMinutePerProjectPerModel-FreeTier")
}

func className(c classify.Class) string {
	if c == classify.OK {
		return "ok"
	}
	return c.String()
}

// actionName names what the default table does with v, in the corpus's
// vocabulary.
func actionName(t classify.Table, v classify.Verdict) string {
	if v.Class == classify.OK {
		return "answer"
	}
	a := t.Action(v.Class)
	switch {
	case a.Route == classify.RouteFailClosed:
		return "fail_closed"
	case a.Retry:
		return "retry"
	case a.Park == classify.ParkQuota:
		return "park_quota"
	case a.Park == classify.ParkRetired:
		return "park_retired"
	}
	return a.Route.String()
}

// rawVerdict reads a case as a client without an SDK would.
func rawVerdict(t *testing.T, c corpus.Case) classify.Verdict {
	t.Helper()
	body := c.ResponseBody()
	switch {
	case c.Stream():
		return streamVerdict(c, body)
	case c.Status >= 200 && c.Status < 300:
		if f, ok := classify.ParseErrorBody(body); ok {
			// An error inside a 200 (OpenRouter): its code is the status.
			return classify.FromFacts(f)
		}
		v, ok := answerVerdict(body, false, &streamState{})
		require.True(t, ok, "a 200 whose body is not an answer")
		return v
	}
	resp := &http.Response{StatusCode: c.Status, Header: c.Header.Clone(), Body: io.NopCloser(bytes.NewReader(body))}
	return classify.Classify(classify.ReadResponse(context.Background(), resp))
}

// wireAnswer is the part of a Gemini or OpenAI answer that decides how a
// 200 counts.
type wireAnswer struct {
	Candidates []struct {
		Content struct {
			Parts []map[string]any `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Choices []struct {
		Message *struct {
			Content   string `json:"content"`
			Refusal   string `json:"refusal"`
			ToolCalls []any  `json:"tool_calls"`
		} `json:"message"`
		Delta *struct {
			Content   string `json:"content"`
			ToolCalls []any  `json:"tool_calls"`
		} `json:"delta"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	// Anthropic's message (unary) and stream events: the event type, the
	// message's content blocks and stop reason, a delta (a content block's
	// text_delta, or message_delta's stop_reason) and a block's start.
	Type         string           `json:"type"`
	Content      []map[string]any `json:"content"`
	StopReason   *string          `json:"stop_reason"`
	Delta        map[string]any   `json:"delta"`
	ContentBlock map[string]any   `json:"content_block"`
}

// anthropicContent reports whether Anthropic content blocks carry
// something usable: non-blank text, or a tool call.
func anthropicContent(blocks ...map[string]any) bool {
	for _, b := range blocks {
		switch b["type"] {
		case "text", "text_delta":
			if text, _ := b["text"].(string); strings.TrimSpace(text) != "" {
				return true
			}
		case "tool_use", "server_tool_use", "input_json_delta":
			return true
		}
	}
	return false
}

// streamState is what a stream has carried so far.
type streamState struct {
	content  bool
	finished bool
	// stopReason is the stop reason of an Anthropic stream's message_delta,
	// judged when message_stop ends it.
	stopReason string
}

// answerVerdict judges one answer (or one stream event). ok is false when
// the JSON is not an answer at all. For a stream event without a finish
// reason the verdict is OK and the stream goes on.
func answerVerdict(body []byte, stream bool, st *streamState) (classify.Verdict, bool) {
	var w wireAnswer
	if json.Unmarshal(body, &w) != nil {
		return classify.Verdict{}, false
	}
	if w.PromptFeedback != nil {
		if v := classify.BlockReason(w.PromptFeedback.BlockReason); v.Class != classify.OK {
			return v, true
		}
	}
	reason, hasReason := "", false
	switch {
	case w.Type == "message" || w.Type == "" && w.StopReason != nil:
		// An Anthropic message.
		st.content = anthropicContent(w.Content...)
		if w.StopReason != nil {
			reason, hasReason = *w.StopReason, true
		}
	case strings.HasPrefix(w.Type, "message_") || strings.HasPrefix(w.Type, "content_block_") || w.Type == "ping":
		// An Anthropic stream event: only message_stop ends the answer,
		// with the stop reason message_delta gave.
		switch w.Type {
		case "content_block_start":
			st.content = st.content || anthropicContent(w.ContentBlock)
		case "content_block_delta":
			st.content = st.content || anthropicContent(w.Delta)
		case "message_delta":
			st.stopReason, _ = w.Delta["stop_reason"].(string)
		case "message_stop":
			st.finished = true
			return classify.FinishReason(st.stopReason, st.content), true
		}
		return classify.Verdict{Class: classify.OK}, true
	case len(w.Candidates) > 0:
		cand := w.Candidates[0]
		for _, p := range cand.Content.Parts {
			if thought, _ := p["thought"].(bool); thought {
				continue
			}
			if text, _ := p["text"].(string); strings.TrimSpace(text) != "" {
				st.content = true
			}
			for k := range p {
				if k != "text" && k != "thought" && k != "thoughtSignature" {
					st.content = true
				}
			}
		}
		reason, hasReason = cand.FinishReason, cand.FinishReason != ""
	case len(w.Choices) > 0:
		ch := w.Choices[0]
		if m := ch.Message; m != nil {
			if m.Refusal != "" && m.Content == "" {
				return classify.Verdict{Class: classify.Safety, Reason: "model refused"}, true
			}
			st.content = st.content || strings.TrimSpace(m.Content) != "" || len(m.ToolCalls) > 0
		}
		if d := ch.Delta; d != nil {
			st.content = st.content || strings.TrimSpace(d.Content) != "" || len(d.ToolCalls) > 0
		}
		if ch.FinishReason != nil {
			reason, hasReason = *ch.FinishReason, true
		}
	case w.PromptFeedback == nil && !stream:
		return classify.Verdict{}, false
	}
	if stream && !hasReason {
		return classify.Verdict{Class: classify.OK}, true
	}
	st.finished = true
	return classify.FinishReason(reason, st.content), true
}

// streamVerdict reads an event stream: comments are skipped, an error
// event (framed as data or, as some servers send it, bare) is classified
// like an error response — also after a finish reason, which does not end
// an answer by itself — and the last finish reason judges the answer once
// the stream has closed.
func streamVerdict(c corpus.Case, body []byte) classify.Verdict {
	st := &streamState{}
	events := strings.Split(strings.ReplaceAll(string(body), "\r\n", "\n"), "\n\n")
	for _, ev := range events {
		var data []string
		bare := false
		for _, line := range strings.Split(ev, "\n") {
			switch {
			case line == "", strings.HasPrefix(line, ":"), strings.HasPrefix(line, "event:"), strings.HasPrefix(line, "id:"):
				// Comments, and the fields that name an event (Anthropic's
				// "event: message_start") rather than carry it.
			case strings.HasPrefix(line, "data:"):
				data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
			default:
				bare = true
			}
		}
		payload := strings.Join(data, "\n")
		if bare {
			payload = strings.TrimSpace(ev)
		}
		if payload == "" || payload == "[DONE]" {
			continue
		}
		if f, ok := classify.ParseErrorBody([]byte(payload)); ok {
			if f.HTTPStatus == 0 && f.Status == "" && f.Code == "" {
				// Nothing to classify by: as far as the stream goes, it broke.
				return classify.Verdict{Class: classify.Transient, Reason: "error event in stream"}
			}
			return classify.FromFacts(f)
		}
		if v, ok := answerVerdict([]byte(payload), true, st); ok && v.Class != classify.OK {
			return v
		}
	}
	if st.finished {
		return classify.Verdict{Class: classify.OK}
	}
	// Ended without a finish reason: a dropped stream.
	return classify.Verdict{Class: classify.Transient, Reason: "stream ended without a finish reason"}
}
