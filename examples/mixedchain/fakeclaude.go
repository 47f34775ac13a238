package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
)

// fakeClaude plays Anthropic's Messages API for the story, in the shapes
// of Anthropic's docs (https://docs.anthropic.com/en/api/messages,
// /en/api/messages-streaming, /en/api/errors): a message with the reply's
// text — streamed as message_start, text deltas, message_delta and
// message_stop when the request asks for a stream — or, while overloaded
// is set, the 529 overloaded_error Anthropic answers under load.
type fakeClaude struct {
	srv        *httptest.Server
	reply      func(prompt string) string
	overloaded atomic.Bool
	requests   atomic.Int64
}

func newFakeClaude(reply func(prompt string) string) *fakeClaude {
	f := &fakeClaude{reply: reply}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	return f
}

// URL is the base URL to give the SDK (option.WithBaseURL).
func (f *fakeClaude) URL() string { return f.srv.URL }

// Client is an HTTP client for the server.
func (f *fakeClaude) Client() *http.Client { return f.srv.Client() }

// Close stops the server.
func (f *fakeClaude) Close() { f.srv.Close() }

// request is the part of a Messages request the fake reads.
type request struct {
	Model    string `json:"model"`
	Stream   bool   `json:"stream"`
	Messages []struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	} `json:"messages"`
}

func (f *fakeClaude) serve(w http.ResponseWriter, r *http.Request) {
	f.requests.Add(1)
	var req request
	body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if r.URL.Path != "/v1/messages" || json.Unmarshal(body, &req) != nil {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad request"}}`)
		return
	}
	if f.overloaded.Load() {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(529)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
		return
	}
	var prompt string
	if n := len(req.Messages); n > 0 && len(req.Messages[n-1].Content) > 0 {
		prompt = req.Messages[n-1].Content[0].Text
	}
	text := f.reply(prompt)
	in, out := len(strings.Fields(prompt))+8, len(strings.Fields(text))
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	if !req.Stream {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_fake","type":"message","role":"assistant","model":`+quote(req.Model)+
			`,"content":[{"type":"text","text":`+quote(text)+`}],"stop_reason":"end_turn","stop_sequence":null,`+
			`"usage":{"input_tokens":`+strconv.Itoa(in)+`,"output_tokens":`+strconv.Itoa(out)+`}}`)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(typ, data string) { _, _ = io.WriteString(w, "event: "+typ+"\ndata: "+data+"\n\n") }
	event("message_start", `{"type":"message_start","message":{"id":"msg_fake","type":"message","role":"assistant","content":[],"model":`+
		quote(req.Model)+`,"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":`+strconv.Itoa(in)+`,"output_tokens":1}}}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	for _, word := range strings.SplitAfter(text, " ") {
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+quote(word)+`}}`)
	}
	event("content_block_stop", `{"type":"content_block_stop","index":0}`)
	event("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":`+strconv.Itoa(out)+`}}`)
	event("message_stop", `{"type":"message_stop"}`)
}
