package fakegemini_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/internal/testbed/fakegemini"
)

const streamPath = "/v1beta/models/m:streamGenerateContent?alt=sse"

// sseEvents splits an SSE body into its events, checking the
// "data: {json}\r\n\r\n" framing.
func sseEvents(t *testing.T, body []byte) (data []genResponse, comments []string) {
	t.Helper()
	require.True(t, bytes.HasSuffix(body, []byte("\r\n\r\n")), "body ends with a blank line: %q", body)
	for _, ev := range strings.Split(strings.TrimSuffix(string(body), "\r\n\r\n"), "\r\n\r\n") {
		switch {
		case strings.HasPrefix(ev, "data: "):
			payload := strings.TrimPrefix(ev, "data: ")
			require.NotContains(t, payload, "\n")
			data = append(data, decode[genResponse](t, []byte(payload)))
		case strings.HasPrefix(ev, ":"):
			comments = append(comments, ev)
		default:
			t.Fatalf("unexpected event %q", ev)
		}
	}
	return data, comments
}

func joinText(chunks []genResponse) string {
	var b strings.Builder
	for _, c := range chunks {
		b.WriteString(c.text())
	}
	return b.String()
}

func TestStreamFraming(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{Reply: fakegemini.Text("abcdefghij"), Chunks: 4, ChunkDelay: time.Millisecond})

	r := do(t, srv, http.MethodPost, streamPath, genBody("x"))
	require.Equal(t, 200, r.status)
	assert.Equal(t, "text/event-stream", r.header.Get("Content-Type"))
	chunks, comments := sseEvents(t, r.body)
	require.Len(t, chunks, 4)
	assert.Empty(t, comments)
	assert.Equal(t, "abcdefghij", joinText(chunks))
	for i, c := range chunks {
		require.Len(t, c.Candidates, 1)
		assert.Equal(t, "model", c.Candidates[0].Content.Role)
		assert.Equal(t, "m", c.ModelVersion)
		assert.NotEmpty(t, c.ResponseID)
		if i < len(chunks)-1 {
			assert.Empty(t, c.Candidates[0].FinishReason)
			assert.Nil(t, c.UsageMetadata)
		}
	}
	last := chunks[len(chunks)-1]
	assert.Equal(t, "STOP", last.Candidates[0].FinishReason)
	require.NotNil(t, last.UsageMetadata)
	assert.Positive(t, last.UsageMetadata.TotalTokenCount)
	assert.EqualValues(t, 1, srv.Count("m", fakegemini.Success))
}

func TestStreamDefaultsAndKeepAlive(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	chunks, _ := sseEvents(t, do(t, srv, http.MethodPost, streamPath, genBody("hello there")).body)
	assert.Len(t, chunks, 3)
	assert.Equal(t, "answer from m: hello there", joinText(chunks))

	srv.SetScript("m", fakegemini.Script{KeepAlive: true, Reply: fakegemini.Text("xy"), Chunks: 5})
	chunks, comments := sseEvents(t, do(t, srv, http.MethodPost, streamPath, genBody("x")).body)
	assert.Len(t, chunks, 2, "no more chunks than runes")
	assert.Equal(t, []string{": keepalive"}, comments)
}

func TestStreamJSONArray(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	r := do(t, srv, http.MethodPost, "/v1beta/models/m:streamGenerateContent", genBody("x"))
	require.Equal(t, 200, r.status)
	assert.Equal(t, "application/json; charset=UTF-8", r.header.Get("Content-Type"))
	var chunks []genResponse
	require.NoError(t, json.Unmarshal(r.body, &chunks), "%s", r.body)
	assert.Len(t, chunks, 3)
	assert.Equal(t, "STOP", chunks[2].Candidates[0].FinishReason)
}

func TestStreamCut(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", fakegemini.Script{
		Chunks: 2,
		Rules:  []fakegemini.Rule{{Kind: fakegemini.StreamCut, P: fakegemini.Always, Params: fakegemini.Params{CutAfter: 3}}},
	})
	resp, err := srv.Client().Post(srv.URL()+streamPath, "application/json", strings.NewReader(genBody("a long enough prompt")))
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)

	// Read event by event: three complete chunks, then an unexpected EOF.
	sc := bufio.NewReader(resp.Body)
	var events int
	var readErr error
	for {
		line, err := sc.ReadString('\n')
		if err != nil {
			readErr = err
			break
		}
		if strings.HasPrefix(line, "data: ") {
			events++
			g := decode[genResponse](t, []byte(strings.TrimPrefix(strings.TrimSpace(line), "data: ")))
			assert.Empty(t, g.Candidates[0].FinishReason)
		}
	}
	assert.Equal(t, 3, events)
	assert.ErrorIs(t, readErr, io.ErrUnexpectedEOF)
	assert.EqualValues(t, 1, srv.Count("m", fakegemini.StreamCut))
}

func TestStreamNoFinishReason(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()
	srv.SetScript("m", always(fakegemini.NoFinishReason, fakegemini.Params{}))
	r := do(t, srv, http.MethodPost, streamPath, genBody("x"))
	require.Equal(t, 200, r.status)
	chunks, _ := sseEvents(t, r.body)
	require.NotEmpty(t, chunks)
	for _, c := range chunks {
		assert.Empty(t, c.Candidates[0].FinishReason)
	}
	assert.NotNil(t, chunks[len(chunks)-1].UsageMetadata)
}

func TestStreamOKFaults(t *testing.T) {
	srv := fakegemini.New()
	defer srv.Close()

	srv.SetScript("m", always(fakegemini.SafetyFinish, fakegemini.Params{}))
	chunks, _ := sseEvents(t, do(t, srv, http.MethodPost, streamPath, genBody("x")).body)
	require.Len(t, chunks, 1)
	assert.Equal(t, "SAFETY", chunks[0].Candidates[0].FinishReason)

	srv.SetScript("m", always(fakegemini.PromptBlocked, fakegemini.Params{}))
	chunks, _ = sseEvents(t, do(t, srv, http.MethodPost, streamPath, genBody("x")).body)
	require.Len(t, chunks, 1)
	assert.Equal(t, "SAFETY", chunks[0].PromptFeedback.BlockReason)

	srv.SetScript("m", always(fakegemini.MalformedJSON, fakegemini.Params{Text: "{not json"}))
	chunks, _ = sseEvents(t, do(t, srv, http.MethodPost, streamPath, genJSONBody("x")).body)
	assert.Equal(t, "{not json", joinText(chunks))

	// Errors on a stream request are plain JSON errors, not SSE.
	srv.SetScript("m", always(fakegemini.Unavailable, fakegemini.Params{}))
	r := do(t, srv, http.MethodPost, streamPath, genBody("x"))
	assert.Equal(t, 503, r.status)
	assert.Equal(t, "UNAVAILABLE", decode[apiError](t, r.body).Error.Status)
}
