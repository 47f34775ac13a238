package anthropic_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/anthropic"
)

// fakeClaude stands in for Anthropic's API in the examples: it answers
// claude-opus-5 with the 529 Anthropic sends under load, and any other
// model with a short message (as a stream when asked for one).
func fakeClaude() *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"model":"claude-opus-5"`) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(529)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`)
			return
		}
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			for _, ev := range [][2]string{
				{"message_start", `{"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","content":[],"model":"claude-sonnet-5-5","stop_reason":null,"usage":{"input_tokens":12,"output_tokens":1}}}`},
				{"content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`},
				{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Rayleigh "}}`},
				{"content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"scattering."}}`},
				{"content_block_stop", `{"type":"content_block_stop","index":0}`},
				{"message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":4}}`},
				{"message_stop", `{"type":"message_stop"}`},
			} {
				_, _ = io.WriteString(w, "event: "+ev[0]+"\ndata: "+ev[1]+"\n\n")
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"msg_2","type":"message","role":"assistant","model":"claude-sonnet-5-5","content":[{"type":"text","text":"Rayleigh scattering."}],"stop_reason":"end_turn","usage":{"input_tokens":12,"cache_read_input_tokens":2048,"output_tokens":4}}`)
	}))
}

// ask builds a request for a question, with a system prompt of its own.
func ask(system string) anthropic.PromptFunc[string] {
	return func(q string) sdk.MessageNewParams {
		return sdk.MessageNewParams{
			MaxTokens: 512,
			System:    []sdk.TextBlockParam{{Text: system}},
			Messages:  []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock(q))},
		}
	}
}

// Two Claude models in one chain: the larger is overloaded (a 529), so
// the chain retries it once and moves to the smaller, which answers. One
// attempt is one HTTP request: the SDK's own retries are off.
func Example() {
	srv := fakeClaude()
	defer srv.Close()
	client := anthropic.NewClient(option.WithAPIKey("fake-key"), option.WithBaseURL(srv.URL))
	opus, err := anthropic.NewTier(anthropic.TierConfig[string]{Name: "opus", Model: "claude-opus-5", Client: &client, Prompt: ask("Answer thoroughly.")})
	if err != nil {
		panic(err)
	}
	sonnet, err := anthropic.NewTier(anthropic.TierConfig[string]{Name: "sonnet", Model: "claude-sonnet-5-5", Client: &client, Prompt: ask("Answer in one sentence.")})
	if err != nil {
		panic(err)
	}
	first := opus.Stage()
	first.Retry.MaxAttempts = 2
	first.Retry.BaseDelay = time.Millisecond
	chain, err := fallback.New(fallback.Config[string, anthropic.Answer]{
		Stages:     []fallback.Stage[string, anthropic.Answer]{first, sonnet.Stage()},
		Total:      10 * time.Second,
		Classifier: anthropic.Classifier,
	})
	if err != nil {
		panic(err)
	}
	res, err := chain.Do(context.Background(), "Why is the sky blue?")
	fmt.Println(res.Value.Text, err)
	fmt.Println("tier:", res.Tier, "upstream calls:", res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.N, a.Verdict)
	}
	u := res.Value.Usage
	fmt.Println("input:", u.InputTokens, "of which cache reads:", u.CacheReadInputTokens)
	// Output:
	// Rayleigh scattering. <nil>
	// tier: sonnet upstream calls: 3
	//   opus 1 transient (529): overloaded
	//   opus 2 transient (529): overloaded
	//   sonnet 1 ok
	// input: 2060 of which cache reads: 2048
}

// A stream chain of text chunks: the tier's TextStreamStage shares one
// chain with tiers over other SDKs (gemini, oaicompat). The stream is
// complete only once message_stop has arrived.
func ExampleTier_TextStreamStage() {
	srv := fakeClaude()
	defer srv.Close()
	client := anthropic.NewClient(option.WithAPIKey("fake-key"), option.WithBaseURL(srv.URL))
	sonnet, err := anthropic.NewTier(anthropic.TierConfig[string]{Name: "sonnet", Model: "claude-sonnet-5-5", Client: &client, Prompt: ask("Answer in one sentence.")})
	if err != nil {
		panic(err)
	}
	chain, err := fallback.NewStream(fallback.StreamConfig[string, fallback.TextChunk]{
		Stages:     []fallback.StreamStage[string, fallback.TextChunk]{sonnet.TextStreamStage()},
		Total:      10 * time.Second,
		Classifier: anthropic.Classifier,
	})
	if err != nil {
		panic(err)
	}
	s := chain.Stream(context.Background(), "Why is the sky blue?")
	for chunk, err := range s.Chunks() {
		if err != nil {
			fmt.Println("error:", err)
			break
		}
		fmt.Printf("%q\n", chunk.Text)
	}
	res := s.Result()
	fmt.Println("complete:", res.Complete, "finish:", res.FinishReason)
	// Output:
	// "Rayleigh "
	// "scattering."
	// ""
	// complete: true finish: end_turn
}

// Rule classifies the SDK's errors for any classifier: here a call made
// with the SDK directly, answered with Anthropic's 529.
func ExampleRule() {
	srv := fakeClaude()
	defer srv.Close()
	client := anthropic.NewClient(option.WithAPIKey("fake-key"), option.WithBaseURL(srv.URL))
	_, err := client.Messages.New(context.Background(), sdk.MessageNewParams{Model: "claude-opus-5", MaxTokens: 16,
		Messages: []sdk.MessageParam{sdk.NewUserMessage(sdk.NewTextBlock("hi"))}})
	v, ok := anthropic.Rule(err)
	fmt.Println(ok, v.Class, v.HTTPStatus)
	// Output: true transient 529
}
