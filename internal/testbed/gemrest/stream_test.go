package gemrest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
	"github.com/tierguard/tierguard/internal/testbed/gemrest"
	"github.com/tierguard/tierguard/retry"
)

// drain ranges over a stream and returns its chunks and the error that
// ended it.
func drain(seq iter.Seq2[gemrest.Chunk, error]) (chunks []gemrest.Chunk, err error) {
	for ch, err := range seq {
		if err != nil {
			return chunks, err
		}
		chunks = append(chunks, ch)
	}
	return chunks, nil
}

func joined(chunks []gemrest.Chunk) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.Text)
	}
	return b.String()
}

func TestStreamSuccess(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys(secretKey))
	defer srv.Close()
	var mu sync.Mutex
	var seen fakegemini.Request
	srv.SetScript("m", fakegemini.Script{Chunks: 4, Reply: func(r fakegemini.Request) string {
		mu.Lock()
		defer mu.Unlock()
		seen = r
		return "abcdefghij"
	}})
	c := newClient(t, srv, "m")

	seq := c.Stream(context.Background(), gemrest.Request{Prompt: "p", System: "s", JSON: true})
	assert.Zero(t, srv.Requests("m"), "nothing is sent until the sequence is ranged over")
	chunks, err := drain(seq)
	require.NoError(t, err)
	require.Len(t, chunks, 4)
	assert.Equal(t, "abcdefghij", joined(chunks))
	for i, ch := range chunks {
		assert.Equal(t, "m", ch.ModelVersion)
		assert.NotEmpty(t, ch.ResponseID)
		if i < len(chunks)-1 {
			assert.Empty(t, ch.FinishReason)
			assert.False(t, ch.HasUsage)
		}
		assert.Equal(t, fallback.ChunkInfo{Text: ch.Text, FinishReason: ch.FinishReason}, c.Inspect(ch))
	}
	last := chunks[len(chunks)-1]
	assert.Equal(t, "STOP", last.FinishReason)
	require.True(t, last.HasUsage)
	assert.Positive(t, last.Usage.OutputTokens)

	mu.Lock()
	assert.True(t, seen.Stream)
	assert.True(t, seen.JSON)
	assert.Equal(t, "s\np", seen.Prompt)
	mu.Unlock()
	assert.EqualValues(t, 1, srv.Count("m", fakegemini.Success))

	// Ranging again makes another request.
	_, err = drain(seq)
	require.NoError(t, err)
	assert.EqualValues(t, 2, srv.Requests("m"))
}

// Errors before the first byte of the body classify as for Call.
func TestStreamFaultsBeforeTheBody(t *testing.T) {
	srv := fakegemini.New(fakegemini.WithAPIKeys(secretKey))
	defer srv.Close()
	for i, tc := range faultCases {
		if tc.status < 400 && tc.kind != fakegemini.Drop {
			continue
		}
		t.Run(string(tc.kind), func(t *testing.T) {
			model := fmt.Sprintf("s%d-%s", i, tc.kind)
			srv.SetScript(model, fakegemini.Script{
				Rules: []fakegemini.Rule{{Kind: tc.kind, P: fakegemini.Always, Params: tc.params}},
				Reply: fakegemini.Text(secretAnswer),
			})
			chunks, err := drain(newClient(t, srv, model).Stream(context.Background(), gemrest.Request{Prompt: secretPrompt}))
			require.Error(t, err)
			assert.Empty(t, chunks)
			assertNoSecrets(t, err)
			v := classify.Classify(err)
			assert.Equal(t, tc.class, v.Class, "verdict %v, error %v", v, err)
			assert.Equal(t, tc.status, v.HTTPStatus, "verdict %v", v)
			assert.Equal(t, tc.retryAfter, v.RetryAfter, "verdict %v", v)
			assert.Contains(t, err.Error(), "streamGenerateContent")
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			assert.EqualValues(t, 1, srv.Requests(model))
		})
	}
}

// The fake's stream faults and 200 faults, as a stream sees them.
func TestStreamFaults(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	cases := []struct {
		kind   fakegemini.Kind
		params fakegemini.Params
		chunks int
		finish string
		class  classify.Class // OK: the stream ends without an error
		is     error
	}{
		{kind: fakegemini.StreamCut, params: fakegemini.Params{CutAfter: 2}, chunks: 2, class: classify.Transient, is: io.ErrUnexpectedEOF},
		{kind: fakegemini.NoFinishReason, chunks: 4},
		{kind: fakegemini.SafetyFinish, class: classify.Safety, is: gemrest.ErrAnswerBlocked},
		{kind: fakegemini.PromptBlocked, class: classify.Safety, is: gemrest.ErrPromptBlocked},
		// No candidates: no chunk at all; fallback.StreamChain calls that an
		// empty stream (InvalidOutput) and asks the next tier.
		{kind: fakegemini.EmptyCandidates},
		{kind: fakegemini.MalformedJSON, params: fakegemini.Params{Text: "{not json"}, chunks: 4, finish: "STOP"},
		{kind: fakegemini.Stall, params: fakegemini.Params{StallFor: 20 * time.Millisecond}, chunks: 4, finish: "STOP"},
	}
	for _, tc := range cases {
		t.Run(string(tc.kind), func(t *testing.T) {
			model := "s-" + string(tc.kind)
			srv.SetScript(model, fakegemini.Script{
				Chunks: 4,
				Rules:  []fakegemini.Rule{{Kind: tc.kind, P: fakegemini.Always, Params: tc.params}},
				Reply:  fakegemini.Text(secretAnswer),
			})
			chunks, err := drain(newClient(t, srv, model).Stream(context.Background(), gemrest.Request{Prompt: secretPrompt}))
			assert.Len(t, chunks, tc.chunks)
			assertNoSecrets(t, err)
			if tc.class == classify.OK {
				require.NoError(t, err)
				if len(chunks) > 0 {
					assert.Equal(t, tc.finish, chunks[len(chunks)-1].FinishReason)
				}
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.class, classify.Classify(err).Class, "%v", err)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
		})
	}
}

// Unlike the genai SDK, the tier skips SSE comments.
func TestStreamKeepAlive(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{KeepAlive: true, Chunks: 5, Reply: fakegemini.Text("0123456789")})
	chunks, err := drain(newClient(t, srv, "m").Stream(context.Background(), gemrest.Request{Prompt: "p"}))
	require.NoError(t, err)
	assert.Len(t, chunks, 5)
	assert.Equal(t, "0123456789", joined(chunks))
	assert.Equal(t, "STOP", chunks[4].FinishReason)
}

// sseServer answers every request with status, content type and body.
func sseServer(t *testing.T, status int, contentType, body string) *gemrest.Client {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1beta/models/m:streamGenerateContent" || r.URL.Query().Get("alt") != "sse" {
			http.Error(w, "wrong path "+r.URL.String(), http.StatusBadRequest)
			return
		}
		if contentType != "" {
			w.Header().Set("Content-Type", contentType)
		} else {
			w.Header()["Content-Type"] = nil // no sniffing
		}
		w.WriteHeader(status)
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(ts.Close)
	c, err := gemrest.New(gemrest.Config{BaseURL: ts.URL, Model: "m", HTTPClient: ts.Client(), MaxResponseBytes: 64 << 10})
	require.NoError(t, err)
	return c
}

func data(text, finish string) string {
	s := `data: {"candidates":[{"content":{"parts":[{"text":"` + text + `"}]}`
	if finish != "" {
		s += `,"finishReason":"` + finish + `"`
	}
	return s + `}]}`
}

// TestStreamFraming feeds hand-made event streams to the parser.
func TestStreamFraming(t *testing.T) {
	long := strings.Repeat("x", 40<<10) // longer than the read buffer
	cases := []struct {
		name   string
		ctype  string
		body   string
		text   string
		finish string
		class  classify.Class
		is     error
		absent string
	}{
		{name: "crlf", body: data("a", "") + "\r\n\r\n" + data("b", "STOP") + "\r\n\r\n", text: "ab", finish: "STOP"},
		{name: "lf", body: data("a", "") + "\n\n" + data("b", "STOP") + "\n\n", text: "ab", finish: "STOP"},
		{name: "comments, other fields, extra blank lines",
			body: ": keepalive\n\nevent: message\nid: 7\nretry: 100\n" + data("a", "") + "\n\n\n\n:ping\r\n\r\n" + data("b", "STOP") + "\n\n",
			text: "ab", finish: "STOP"},
		{name: "data split over lines", body: "data: {\"candidates\":\ndata: [{\"content\":{\"parts\":[{\"text\":\"a\"}]},\"finishReason\":\"STOP\"}]}\n\n", text: "a", finish: "STOP"},
		{name: "no space after the colon", body: "data:" + strings.TrimPrefix(data("a", "STOP"), "data: ") + "\n\n", text: "a", finish: "STOP"},
		{name: "last event without its blank line", body: data("a", "") + "\n\n" + data("b", "STOP"), text: "ab", finish: "STOP"},
		{name: "long event", body: data(long, "STOP") + "\n\n", text: long, finish: "STOP"},
		{name: "usage-only chunk first is skipped", body: `data: {"usageMetadata":{"promptTokenCount":1}}` + "\n\n" + data("a", "STOP") + "\n\n", text: "a", finish: "STOP"},
		{name: "empty body", body: ""},
		{name: "no content type", ctype: "-", body: data("a", "STOP") + "\n\n", text: "a", finish: "STOP"},
		{name: "mid-stream error event", body: data("a", "") + "\n\n" + `data: {"error":{"code":503,"message":"` + secretAnswer + `","status":"UNAVAILABLE"}}` + "\n\n",
			text: "a", class: classify.Transient, absent: secretAnswer},
		{name: "mid-stream 429 with RetryInfo", body: data("a", "") + "\n\n" + `data: {"error":{"code":429,"message":"slow down","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"2s"}]}}` + "\n\n",
			text: "a", class: classify.RateLimited},
		{name: "error event of the wrong shape", body: `data: {"error":"` + secretAnswer + `"}` + "\n\n", class: classify.Transient, absent: secretAnswer},
		{name: "malformed data", body: data("a", "") + "\n\ndata: {\"candidates\":[" + secretAnswer + "\n\n", text: "a", class: classify.Transient, absent: secretAnswer},
		{name: "safety mid-stream", body: data("a", "") + "\n\n" + data(secretAnswer, "PROHIBITED_CONTENT") + "\n\n", text: "a", class: classify.Safety, is: gemrest.ErrAnswerBlocked, absent: secretAnswer},
		{name: "event too large", body: data(strings.Repeat("y", 70<<10), "STOP") + "\n\n", class: classify.InvalidOutput, is: gemrest.ErrResponseTooLarge},
		{name: "line too large", body: ": " + strings.Repeat("z", 70<<10) + "\n\n", class: classify.InvalidOutput, is: gemrest.ErrResponseTooLarge},
		{name: "json instead of sse", ctype: "application/json", body: "[" + strings.TrimPrefix(data("a", "STOP"), "data: ") + "]", class: classify.Transient, is: gemrest.ErrNotEventStream},
		{name: "html page", ctype: "text/html", body: "<html>" + secretAnswer + "</html>", class: classify.Transient, is: gemrest.ErrNotEventStream, absent: secretAnswer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctype := "text/event-stream; charset=utf-8"
			switch tc.ctype {
			case "-":
				ctype = ""
			case "":
			default:
				ctype = tc.ctype
			}
			c := sseServer(t, http.StatusOK, ctype, tc.body)
			chunks, err := drain(c.Stream(context.Background(), gemrest.Request{Prompt: "p"}))
			assert.Equal(t, tc.text, joined(chunks))
			if len(chunks) > 0 {
				assert.Equal(t, tc.finish, chunks[len(chunks)-1].FinishReason)
			}
			if tc.class == classify.OK {
				require.NoError(t, err)
				return
			}
			require.Error(t, err)
			v := classify.Classify(err)
			assert.Equal(t, tc.class, v.Class, "%v", err)
			if tc.is != nil {
				assert.ErrorIs(t, err, tc.is)
			}
			if tc.absent != "" {
				assert.NotContains(t, err.Error(), tc.absent)
			}
			if tc.name == "mid-stream 429 with RetryInfo" {
				assert.Equal(t, 2*time.Second, v.RetryAfter)
				assert.Equal(t, 429, v.HTTPStatus)
			}
		})
	}
}

func TestStreamEmptyPrompt(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	_, err := drain(newClient(t, srv, "m").Stream(context.Background(), gemrest.Request{Prompt: " "}))
	assert.Equal(t, classify.InvalidRequest, classify.Classify(err).Class)
	assert.Zero(t, srv.Requests("m"))
}

// A consumer that stops early closes the connection: the server sees the
// request cancelled.
func TestStreamConsumerStops(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Chunks: 10, ChunkDelay: 50 * time.Millisecond, Reply: fakegemini.Text("0123456789")})
	n := 0
	for ch, err := range newClient(t, srv, "m").Stream(context.Background(), gemrest.Request{Prompt: "p"}) {
		require.NoError(t, err)
		assert.Equal(t, "0", ch.Text)
		n++
		break
	}
	assert.Equal(t, 1, n)
	require.Eventually(t, func() bool { return srv.Count("m", fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond,
		"the server saw the request cancelled")
	assert.Zero(t, srv.InFlight())
}

// The context ending mid-stream ends the stream with the context's error,
// and the server sees the request cancelled.
func TestStreamContextEnds(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Chunks: 10, ChunkDelay: 100 * time.Millisecond, Reply: fakegemini.Text("0123456789")})
	ctx, cancel := context.WithTimeout(context.Background(), 250*time.Millisecond)
	defer cancel()
	start := time.Now()
	chunks, err := drain(newClient(t, srv, "m").Stream(ctx, gemrest.Request{Prompt: "p"}))
	assert.Less(t, time.Since(start), 3*time.Second)
	assert.NotEmpty(t, chunks)
	assert.Less(t, len(chunks), 10)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Equal(t, classify.DeadlineExhausted, classify.Classify(err).Class)
	require.Eventually(t, func() bool { return srv.Count("m", fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond)

	// Cancelled before the first byte (a stall).
	srv.SetScript("stall", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Stall, P: fakegemini.Always}}})
	ctx2, cancel2 := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel2)
	_, err = drain(newClient(t, srv, "stall").Stream(ctx2, gemrest.Request{Prompt: "p"}))
	require.ErrorIs(t, err, context.Canceled)
	require.Eventually(t, func() bool { return srv.Count("stall", fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond)
}

// streamChain is pro → flash over the fake's streaming endpoint.
func streamChain(t *testing.T, srv *fakegemini.Server, edit func(stages []fallback.StreamStage[string, gemrest.Chunk])) *fallback.StreamChain[string, gemrest.Chunk] {
	t.Helper()
	tier := func(name, model string) *gemrest.Tier[string] {
		c, err := gemrest.New(gemrest.Config{BaseURL: srv.URL(), Model: model, Name: name, HTTPClient: srv.Client()})
		require.NoError(t, err)
		return gemrest.NewTier(c, func(q string) gemrest.Request { return gemrest.Request{Prompt: name + ": " + q} })
	}
	pro, flash := tier("pro", "gemini-2.5-pro"), tier("flash", "gemini-2.5-flash")
	stages := []fallback.StreamStage[string, gemrest.Chunk]{
		{Tier: pro, Model: pro.Model(), Retry: retryOnce, FirstChunkTimeout: time.Second, IdleTimeout: time.Second},
		{Tier: flash, Model: flash.Model(), Retry: retryOnce, FirstChunkTimeout: time.Second, IdleTimeout: time.Second},
	}
	if edit != nil {
		edit(stages)
	}
	c, err := fallback.NewStream(fallback.StreamConfig[string, gemrest.Chunk]{Stages: stages, Total: 5 * time.Second})
	require.NoError(t, err)
	return c
}

func drainChain(s *fallback.Stream[string, gemrest.Chunk]) (string, error) {
	var b strings.Builder
	for ch, err := range s.Chunks() {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(ch.Text)
	}
	return b.String(), nil
}

func TestStreamChainOverFake(t *testing.T) {
	t.Run("503 before the first chunk falls back", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Unavailable, P: fakegemini.Always}}})
		s := streamChain(t, srv, nil).Stream(context.Background(), "hello")
		text, err := drainChain(s)
		require.NoError(t, err)
		assert.Equal(t, "answer from gemini-2.5-flash: flash: hello", text)
		res := s.Result()
		assert.True(t, res.Complete)
		assert.Equal(t, "flash", res.Tier)
		assert.True(t, res.Degraded)
		assert.Equal(t, 2, res.UpstreamCalls)
		assert.Equal(t, "STOP", res.FinishReason)
	})
	t.Run("a cut after the first chunk is incomplete, no fallback", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Chunks: 5, Rules: []fakegemini.Rule{{Kind: fakegemini.StreamCut, P: fakegemini.Always, Params: fakegemini.Params{CutAfter: 3}}}})
		s := streamChain(t, srv, nil).Stream(context.Background(), "hello")
		_, err := drainChain(s)
		var ie *fallback.IncompleteError
		require.ErrorAs(t, err, &ie)
		assert.Equal(t, 3, ie.Chunks)
		assert.Equal(t, "pro", ie.Tier)
		assert.ErrorIs(t, err, io.ErrUnexpectedEOF)
		assert.Equal(t, classify.Transient, ie.V.Class)
		assert.Zero(t, srv.Requests("gemini-2.5-flash"), "no fallback after the commit point")
	})
	t.Run("no finish reason is incomplete", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.NoFinishReason, P: fakegemini.Always}}})
		_, err := drainChain(streamChain(t, srv, nil).Stream(context.Background(), "hello"))
		require.ErrorIs(t, err, fallback.ErrNoFinishReason)
	})
	t.Run("empty candidates fall back", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.EmptyCandidates, P: fakegemini.Always}}})
		s := streamChain(t, srv, nil).Stream(context.Background(), "hello")
		_, err := drainChain(s)
		require.NoError(t, err)
		assert.Equal(t, "flash", s.Result().Tier)
		require.NotEmpty(t, s.Result().Attempts())
		assert.ErrorIs(t, s.Result().Attempts()[0].Err, fallback.ErrEmptyStream)
	})
	t.Run("a stall mid-stream ends at the idle timeout", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Chunks: 3, ChunkDelay: 3 * time.Second})
		c := streamChain(t, srv, func(st []fallback.StreamStage[string, gemrest.Chunk]) { st[0].IdleTimeout = 200 * time.Millisecond })
		start := time.Now()
		_, err := drainChain(c.Stream(context.Background(), "hello"))
		assert.Less(t, time.Since(start), 2*time.Second)
		require.ErrorIs(t, err, fallback.ErrIdleTimeout)
		require.Eventually(t, func() bool { return srv.Count("gemini-2.5-pro", fakegemini.Canceled) == 1 }, 5*time.Second, 10*time.Millisecond)
	})
	t.Run("a safety stop fails closed", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.SafetyFinish, P: fakegemini.Always}}})
		_, err := drainChain(streamChain(t, srv, nil).Stream(context.Background(), "hello"))
		require.Error(t, err)
		var fe *fallback.Error
		require.True(t, errors.As(err, &fe), "%v", err)
		assert.True(t, fe.FailedClosed)
		assert.ErrorIs(t, err, gemrest.ErrAnswerBlocked)
		assert.Zero(t, srv.Requests("gemini-2.5-flash"), "never route around a policy decision")
	})
	t.Run("retries before the first chunk", func(t *testing.T) {
		srv := fakegemini.New()
		defer srv.Close()
		srv.SetScript("gemini-2.5-pro", fakegemini.Script{Rules: []fakegemini.Rule{{Kind: fakegemini.Drop, P: fakegemini.Always, FirstN: 1}}})
		c := streamChain(t, srv, func(st []fallback.StreamStage[string, gemrest.Chunk]) {
			st[0].Retry = retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}
		})
		s := c.Stream(context.Background(), "hello")
		_, err := drainChain(s)
		require.NoError(t, err)
		assert.Equal(t, "pro", s.Result().Tier)
		assert.Equal(t, 2, s.Result().UpstreamCalls)
	})
}
