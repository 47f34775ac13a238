package fakegemini_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// Local mirrors of the genai and openai-go wire shapes.

type apiError struct {
	Error struct {
		Code    int              `json:"code"`
		Message string           `json:"message"`
		Status  string           `json:"status"`
		Details []map[string]any `json:"details"`
	} `json:"error"`
}

type part struct {
	Text string `json:"text"`
}

type candidate struct {
	Content *struct {
		Parts []part `json:"parts"`
		Role  string `json:"role"`
	} `json:"content"`
	FinishReason  string           `json:"finishReason"`
	Index         int              `json:"index"`
	SafetyRatings []map[string]any `json:"safetyRatings"`
}

type usage struct {
	PromptTokenCount     int `json:"promptTokenCount"`
	CandidatesTokenCount int `json:"candidatesTokenCount"`
	TotalTokenCount      int `json:"totalTokenCount"`
}

type genResponse struct {
	Candidates     []candidate `json:"candidates"`
	PromptFeedback *struct {
		BlockReason   string           `json:"blockReason"`
		SafetyRatings []map[string]any `json:"safetyRatings"`
	} `json:"promptFeedback"`
	UsageMetadata *usage `json:"usageMetadata"`
	ModelVersion  string `json:"modelVersion"`
	ResponseID    string `json:"responseId"`
}

func (g genResponse) text() string {
	var b bytes.Buffer
	for _, c := range g.Candidates {
		if c.Content != nil {
			for _, p := range c.Content.Parts {
				b.WriteString(p.Text)
			}
		}
	}
	return b.String()
}

type oaiErr struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

type oaiResp struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	Model   string `json:"model"`
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Role    string  `json:"role"`
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

// genBody is a generateContent request body with one user text.
func genBody(prompt string) string {
	b, _ := json.Marshal(map[string]any{
		"contents":         []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}},
		"generationConfig": map[string]any{"temperature": 0.2},
		"unknownField":     true,
	})
	return string(b)
}

func genJSONBody(prompt string) string {
	b, _ := json.Marshal(map[string]any{
		"contents":         []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": prompt}}}},
		"generationConfig": map[string]any{"responseMimeType": "application/json"},
	})
	return string(b)
}

func chatBody(model, prompt string) string {
	b, _ := json.Marshal(map[string]any{
		"model":    model,
		"messages": []any{map[string]any{"role": "user", "content": prompt}},
	})
	return string(b)
}

type result struct {
	status int
	header http.Header
	body   []byte
}

func do(t *testing.T, srv *fakegemini.Server, method, path, body string, hdr ...string) result {
	t.Helper()
	return doCtx(t, context.Background(), srv, method, path, body, hdr...)
}

func doCtx(t *testing.T, ctx context.Context, srv *fakegemini.Server, method, path, body string, hdr ...string) result {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = bytes.NewBufferString(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, srv.URL()+path, rd)
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := srv.Client().Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return result{resp.StatusCode, resp.Header, b}
}

func generate(t *testing.T, srv *fakegemini.Server, model, prompt string) result {
	t.Helper()
	return do(t, srv, http.MethodPost, "/v1beta/models/"+model+":generateContent", genBody(prompt))
}

func decode[T any](t *testing.T, b []byte) T {
	t.Helper()
	var v T
	require.NoError(t, json.Unmarshal(b, &v), "body: %.300s", b)
	return v
}

// clock is a settable clock for WithNow.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}
