package gemini_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/genai"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/gemini"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/retry"
)

// Secrets that must never reach an error's text.
const (
	streamSecret = "SECRET-STREAM-ANSWER-3b1e"
)

// idle is the stream stages' IdleTimeout: short, so stall tests are fast,
// yet far above a loopback round trip.
const idle = 300 * time.Millisecond

// streamChain is pro (one attempt) → flash over the real SDK's
// GenerateContentStream, against the env's fake server.
func (e *env) streamChain(t *testing.T, edit ...func(*fallback.StreamConfig[question, gemini.Answer])) *fallback.StreamChain[question, gemini.Answer] {
	t.Helper()
	pro := e.tier(t, "pro", proModel).StreamStage()
	pro.Retry = retry.Policy{MaxAttempts: 1}
	pro.FirstChunkTimeout = time.Second
	pro.IdleTimeout = idle
	flash := e.tier(t, "flash", flashModel).StreamStage()
	flash.Retry = retry.Policy{MaxAttempts: 1}
	flash.FirstChunkTimeout = time.Second
	flash.IdleTimeout = idle
	cfg := fallback.StreamConfig[question, gemini.Answer]{
		Stages:     []fallback.StreamStage[question, gemini.Answer]{pro, flash},
		Total:      5 * time.Second,
		Classifier: gemini.Classifier,
	}
	for _, f := range edit {
		f(&cfg)
	}
	c, err := fallback.NewStream(cfg)
	require.NoError(t, err)
	return c
}

// consume ranges over a stream as a consumer would, showing each chunk.
func consume(s *fallback.Stream[question, gemini.Answer]) (shown []string, err error) {
	for a, err := range s.Chunks() {
		if err != nil {
			return shown, err
		}
		shown = append(shown, a.Text)
	}
	return shown, nil
}

func TestStreamCompletes(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Chunks: 4, Reply: fakegemini.Text("0123456789")})
	s := e.streamChain(t).Stream(context.Background(), question{Text: "hi"})
	shown, err := consume(s)
	require.NoError(t, err)
	assert.Equal(t, []string{"01", "234", "56", "789"}, shown)
	res := s.Result()
	assert.True(t, res.Complete)
	assert.Equal(t, "pro", res.Tier)
	assert.False(t, res.Degraded)
	assert.Equal(t, 4, res.Chunks)
	assert.Equal(t, "STOP", res.FinishReason)
	assert.Positive(t, res.TimeToFirstChunk)
	assert.EqualValues(t, 1, e.sent.n.Load(), "one HTTP request")
}

// Each chunk is an Answer: its text, its finish reason, the usage on the
// last, and the SDK's response.
func TestStreamChunks(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Chunks: 2, Reply: fakegemini.Text("abcd")})
	tier := e.tier(t, "pro", proModel)
	var chunks []gemini.Answer
	for a, err := range tier.Stream(context.Background(), question{Text: "hi"}) {
		require.NoError(t, err)
		chunks = append(chunks, a)
	}
	require.Len(t, chunks, 2)
	assert.Equal(t, "ab", chunks[0].Text)
	assert.Empty(t, chunks[0].FinishReason)
	assert.Equal(t, genai.FinishReasonStop, chunks[1].FinishReason)
	assert.True(t, chunks[1].HasUsage)
	assert.NotNil(t, chunks[1].Response)
	assert.Equal(t, fallback.ChunkInfo{Text: "cd", FinishReason: "STOP"}, tier.Inspect(chunks[1]))
	st := tier.StreamStage()
	assert.Equal(t, proModel, st.Model)
	assert.Equal(t, "gcp.gemini", st.Provider)
}

func TestStream503BeforeFirstChunkFallsBack(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, always(fakegemini.Unavailable, fakegemini.Params{RetryAfter: "3"}))
	s := e.streamChain(t).Stream(context.Background(), question{Text: "hi"})
	shown, err := consume(s)
	require.NoError(t, err)
	assert.Equal(t, "answer from "+flashModel+": flash: hi", strings.Join(shown, ""))
	res := s.Result()
	assert.Equal(t, "flash", res.Tier)
	assert.True(t, res.Degraded)
	assert.True(t, res.Complete)
	assert.Equal(t, 2, res.UpstreamCalls)
	require.Len(t, res.Attempts(), 2)
	v := res.Attempts()[0].Verdict
	assert.Equal(t, classify.Transient, v.Class)
	assert.Equal(t, 503, v.HTTPStatus)
	assert.Equal(t, 3*time.Second, v.RetryAfter, "the Transport carried the Retry-After header")
	var re *gemini.ResponseError
	assert.ErrorAs(t, res.Attempts()[0].Err, &re)
}

func TestStreamCutAfterThreeChunks(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Chunks: 5, Reply: fakegemini.Text(streamSecret),
		Rules: []fakegemini.Rule{{Kind: fakegemini.StreamCut, P: fakegemini.Always, Params: fakegemini.Params{CutAfter: 3}}}})
	s := e.streamChain(t).Stream(context.Background(), question{Text: "hi"})
	shown, err := consume(s)
	assert.Len(t, shown, 3, "the consumer saw three chunks")
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 3, ie.Chunks)
	assert.Equal(t, "pro", ie.Tier)
	assert.Equal(t, len(strings.Join(shown, "")), ie.Bytes)
	assert.ErrorIs(t, err, io.ErrUnexpectedEOF, "the SDK returns the cut as a bare io.ErrUnexpectedEOF")
	assert.Equal(t, classify.Transient, ie.V.Class)
	assert.NotContains(t, err.Error(), streamSecret)
	assert.False(t, s.Result().Complete)
	assert.Zero(t, e.srv.Requests(flashModel), "no fallback after the first chunk")
}

func TestStreamStallEndsAtIdleTimeout(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Chunks: 4, ChunkDelay: 10 * time.Second})
	start := time.Now()
	shown, err := consume(e.streamChain(t).Stream(context.Background(), question{Text: "hi"}))
	elapsed := time.Since(start)
	assert.Len(t, shown, 1)
	require.ErrorIs(t, err, fallback.ErrIdleTimeout)
	assert.ErrorIs(t, err, fallback.ErrIncomplete)
	assert.GreaterOrEqual(t, elapsed, idle)
	assert.Less(t, elapsed, 5*time.Second, "the stall ends at the idle timeout, not at the next chunk")
	require.Eventually(t, func() bool { return e.srv.Count(proModel, fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond,
		"the server saw the request cancelled")
	assert.Zero(t, e.srv.Requests(flashModel))
}

// The SDK ends a stream that closes without a finish reason as if all was
// well; the chain calls it incomplete.
func TestStreamWithoutFinishReasonIsIncomplete(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, always(fakegemini.NoFinishReason, fakegemini.Params{}))
	tier := e.tier(t, "pro", proModel)
	n := 0
	for _, err := range tier.Stream(context.Background(), question{Text: "hi"}) {
		require.NoError(t, err, "the SDK reports no error")
		n++
	}
	assert.Equal(t, 3, n)

	s := e.streamChain(t).Stream(context.Background(), question{Text: "hi"})
	shown, err := consume(s)
	assert.Len(t, shown, 3)
	require.ErrorIs(t, err, fallback.ErrNoFinishReason)
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, 3, ie.Chunks)
	assert.Zero(t, e.srv.Requests(flashModel))
}

// A consumer that stops early cancels the upstream request; no goroutine
// is left behind (TestMain runs goleak).
func TestStreamConsumerBreaksEarly(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Chunks: 10, ChunkDelay: 50 * time.Millisecond, Reply: fakegemini.Text("0123456789")})
	s := e.streamChain(t).Stream(context.Background(), question{Text: "hi"})
	n := 0
	for _, err := range s.Chunks() {
		require.NoError(t, err)
		if n++; n == 2 {
			break
		}
	}
	res := s.Result()
	assert.Equal(t, 2, res.Chunks)
	assert.False(t, res.Complete)
	require.Eventually(t, func() bool { return e.srv.Count(proModel, fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond,
		"the server saw the request cancelled")
	assert.Zero(t, e.srv.InFlight())
}

// The chain's Total bounds the whole stream, however lively it is.
func TestStreamTotalDeadline(t *testing.T) {
	e := newEnv(t, genai.ClientConfig{})
	e.srv.SetScript(proModel, fakegemini.Script{Chunks: 40, ChunkDelay: 50 * time.Millisecond, Reply: fakegemini.Text(strings.Repeat("x", 40))})
	c := e.streamChain(t, func(cfg *fallback.StreamConfig[question, gemini.Answer]) { cfg.Total = 600 * time.Millisecond })
	start := time.Now()
	shown, err := consume(c.Stream(context.Background(), question{Text: "hi"}))
	elapsed := time.Since(start)
	assert.NotEmpty(t, shown)
	assert.Less(t, len(shown), 40)
	var ie *fallback.IncompleteError
	require.ErrorAs(t, err, &ie)
	assert.Equal(t, classify.DeadlineExhausted, ie.V.Class)
	assert.GreaterOrEqual(t, elapsed, 550*time.Millisecond)
	assert.Less(t, elapsed, 3*time.Second, "the deadline, not the stream, ends it")
	require.Eventually(t, func() bool { return e.srv.Count(proModel, fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond)
}

// sseOnce serves a hand-made event stream on the streaming endpoint.
func sseOnce(t *testing.T, body string) *httptest.Server {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, ":streamGenerateContent") {
			http.Error(w, "unexpected "+r.URL.Path, http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

func sseData(text, finish string) string {
	s := `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"` + text + `"}]}`
	if finish != "" {
		s += `,"finishReason":"` + finish + `"`
	}
	return s + "}]}\r\n\r\n"
}

// chainOver is a chain whose first tier streams from a hand-made server
// and whose second tier is the env's flash.
func (e *env) chainOver(t *testing.T, ts *httptest.Server) *fallback.StreamChain[question, gemini.Answer] {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	client, err := gemini.NewClient(context.Background(), genai.ClientConfig{
		APIKey: "k", HTTPClient: &http.Client{Transport: tr}, HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL},
	})
	require.NoError(t, err)
	odd, err := gemini.NewTier(gemini.TierConfig[question]{Name: "odd", Model: proModel, Client: client, Prompt: prompt("")})
	require.NoError(t, err)
	first := odd.StreamStage()
	first.Retry = retry.Policy{MaxAttempts: 1}
	second := e.tier(t, "flash", flashModel).StreamStage()
	c, err := fallback.NewStream(fallback.StreamConfig[question, gemini.Answer]{
		Stages:     []fallback.StreamStage[question, gemini.Answer]{first, second},
		Total:      5 * time.Second,
		Classifier: gemini.Classifier,
	})
	require.NoError(t, err)
	return c
}

// genai v1.77.0 fails a stream on an SSE comment line (": keepalive"),
// which the SSE specification lets servers and proxies send: NewClient's
// Transport removes them, so streams through such a proxy complete.
func TestStreamKeepAliveComment(t *testing.T) {
	t.Run("between chunks", func(t *testing.T) {
		e := newEnv(t, genai.ClientConfig{})
		// The fake writes ": keepalive" before every chunk but the first.
		e.srv.SetScript(proModel, fakegemini.Script{KeepAlive: true, Chunks: 4, Reply: fakegemini.Text("0123456789")})
		s := e.streamChain(t).Stream(context.Background(), question{Text: "hi"})
		shown, err := consume(s)
		require.NoError(t, err)
		assert.Equal(t, "0123456789", strings.Join(shown, ""))
		assert.True(t, s.Result().Complete)
		assert.Zero(t, e.srv.Requests(flashModel))
	})
	t.Run("before the first chunk and between events, with ids and retry fields", func(t *testing.T) {
		e := newEnv(t, genai.ClientConfig{})
		body := ": keepalive\r\n\r\n: ping\n\n" + sseData("hel", "") + "id: 7\r\nretry: 1000\r\n\r\n: keepalive\r\n\r\n" + sseData("lo", "STOP")
		s := e.chainOver(t, sseOnce(t, body)).Stream(context.Background(), question{Text: "hi"})
		shown, err := consume(s)
		require.NoError(t, err)
		assert.Equal(t, "hello", strings.Join(shown, ""))
		assert.Equal(t, "odd", s.Result().Tier, "no fallback: the keepalives are not failures")
	})
	t.Run("a client without the Transport still fails typed", func(t *testing.T) {
		ts := sseOnce(t, sseData("a", "")+": keepalive\r\n\r\n"+sseData("b", "STOP"))
		client, err := genai.NewClient(context.Background(), &genai.ClientConfig{APIKey: "k", HTTPOptions: genai.HTTPOptions{BaseURL: ts.URL}})
		require.NoError(t, err)
		tier, err := gemini.NewTier(gemini.TierConfig[question]{Name: "raw", Model: proModel, Client: client, Prompt: prompt("")})
		require.NoError(t, err)
		var last error
		for _, err := range tier.Stream(context.Background(), question{Text: "hi"}) {
			last = err
		}
		assert.ErrorIs(t, last, gemini.ErrStreamComment)
		assert.Equal(t, classify.Transient, gemini.Classifier.Classify(last).Class)
	})
}

// Stream failures that only a hand-made server produces.
func TestStreamOddBodies(t *testing.T) {
	errEvent := func(code int, status string) string {
		return fmt.Sprintf(`data: {"error":{"code":%d,"message":"%s","status":"%s"}}`+"\r\n\r\n", code, streamSecret, status)
	}
	tests := []struct {
		name     string
		body     string
		chunks   int // chunks the consumer saw; 0: fell back to flash
		class    classify.Class
		is       error
		fellBack bool
	}{
		{name: "error event mid-stream", body: sseData("a", "") + errEvent(503, "UNAVAILABLE"), chunks: 1, class: classify.Transient},
		{name: "error event first", body: errEvent(503, "UNAVAILABLE"), class: classify.Transient, fellBack: true},
		{name: "400 error event first fails closed", body: errEvent(400, "INVALID_ARGUMENT"), class: classify.InvalidRequest},
		{name: "malformed chunk mid-stream", body: sseData("a", "") + `data: {"candidates":[` + streamSecret + "\r\n\r\n", chunks: 1, class: classify.Transient, is: gemini.ErrMalformedChunk},
		{name: "safety mid-stream", body: sseData("a", "") + sseData("", "SAFETY"), chunks: 1, class: classify.Safety},
		{name: "safety first", body: sseData("", "SAFETY"), class: classify.Safety},
		{name: "usage-only chunk first, then text", body: `data: {"usageMetadata":{"promptTokenCount":3}}` + "\r\n\r\n" + sseData("a", "STOP"), chunks: 1},
		// A clean close without content or finish reason was cut: Transient.
		{name: "empty stream", body: "", class: classify.Transient, is: fallback.ErrEmptyStream, fellBack: true},
		{name: "thoughts only, then close", body: `data: {"candidates":[{"content":{"role":"model","parts":[{"text":"hmm","thought":true}]}}]}` + "\r\n\r\n", class: classify.Transient, is: fallback.ErrEmptyStream, fellBack: true},
		// Vertex AI puts STOP on every chunk: only a clean close ends the answer.
		{name: "STOP on every chunk", body: sseData("a", "STOP") + sseData("b", "STOP") + sseData("c", "STOP"), chunks: 3},
		{name: "STOP on every chunk, then an error event", body: sseData("a", "STOP") + sseData("b", "STOP") + errEvent(503, "UNAVAILABLE"), chunks: 2, class: classify.Transient},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, genai.ClientConfig{})
			s := e.chainOver(t, sseOnce(t, tc.body)).Stream(context.Background(), question{Text: "hi"})
			shown, err := consume(s)
			res := s.Result()
			if tc.fellBack {
				require.NoError(t, err)
				assert.Equal(t, "flash", res.Tier)
				a := res.Attempts()[0]
				assert.Equal(t, tc.class, a.Verdict.Class, "%v", a.Err)
				if tc.is != nil {
					assert.ErrorIs(t, a.Err, tc.is)
				}
				assert.NotContains(t, a.Err.Error(), streamSecret)
				return
			}
			assert.Len(t, shown, tc.chunks)
			assert.Zero(t, e.srv.Requests(flashModel), "no fallback")
			if tc.class == classify.OK {
				require.NoError(t, err)
				assert.True(t, res.Complete)
				return
			}
			require.Error(t, err)
			assert.NotContains(t, err.Error(), streamSecret)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			var ie *fallback.IncompleteError
			var fe *fallback.Error
			switch {
			case errors.As(err, &ie):
				assert.Equal(t, tc.class, ie.V.Class, "%v", ie.Cause)
				assert.Equal(t, tc.chunks, ie.Chunks)
			case errors.As(err, &fe):
				assert.Equal(t, tc.class, fe.Cause.Class)
				assert.True(t, fe.FailedClosed)
			default:
				t.Fatalf("unexpected error %T %v", err, err)
			}
		})
	}
}
