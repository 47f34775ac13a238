package fallback_test

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/tierguard/tierguard/breaker"
	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/retry"
	"github.com/tierguard/tierguard/validate"
)

// errOverloaded stands for a 503 from the primary model.
var errOverloaded = classify.Wrap(errors.New("503 UNAVAILABLE"), classify.Verdict{Class: classify.Transient, HTTPStatus: 503})

func ExampleNew() {
	pro := fallback.Tier("pro", func(ctx context.Context, q string) (string, error) {
		return "", errOverloaded // the primary is down
	})
	flash := fallback.Tier("flash", func(ctx context.Context, q string) (string, error) {
		return "a short answer to " + q, nil
	})
	proBreaker, err := breaker.New(breaker.Config{Name: "pro"})
	if err != nil {
		panic(err)
	}

	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: pro, Breaker: proBreaker, TryTimeout: 2 * time.Second,
				Retry: retry.Policy{MaxAttempts: 2, BaseDelay: 10 * time.Millisecond}},
			{Tier: flash, Validate: validate.NonEmpty()},
		},
		Total:   5 * time.Second,
		Default: func(context.Context, string) (string, bool) { return "Please try again later.", true },
	})
	if err != nil {
		panic(err)
	}

	res, err := chain.Do(context.Background(), "why is the sky blue?")
	fmt.Println(res.Value, err)
	fmt.Println("tier:", res.Tier, "degraded:", res.Degraded, "upstream calls:", res.UpstreamCalls)
	for _, a := range res.Attempts() {
		fmt.Println(" ", a.Tier, a.N, a.Verdict.Class)
	}
	// Output:
	// a short answer to why is the sky blue? <nil>
	// tier: flash degraded: true upstream calls: 3
	//   pro 1 transient
	//   pro 2 transient
	//   flash 1 ok
}

// A streaming chain: pro fails before its first chunk, so flash streams the
// answer; once a chunk has reached the caller the stream is committed to
// its tier.
func ExampleNewStream() {
	type chunk struct {
		text, finish string
	}
	inspect := func(c chunk) fallback.ChunkInfo { return fallback.ChunkInfo{Text: c.text, FinishReason: c.finish} }
	pro := fallback.StreamTierFunc("pro", func(ctx context.Context, q string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) { yield(chunk{}, errOverloaded) }
	}, inspect)
	flash := fallback.StreamTierFunc("flash", func(ctx context.Context, q string) iter.Seq2[chunk, error] {
		return func(yield func(chunk, error) bool) {
			for _, c := range []chunk{{text: "Rayleigh "}, {text: "scattering.", finish: "STOP"}} {
				if !yield(c, nil) {
					return
				}
			}
		}
	}, inspect)

	chain, err := fallback.NewStream(fallback.StreamConfig[string, chunk]{
		Stages: []fallback.StreamStage[string, chunk]{
			{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: flash},
		},
		Total: 10 * time.Second,
	})
	if err != nil {
		panic(err)
	}

	stream := chain.Stream(context.Background(), "why is the sky blue?")
	for c, err := range stream.Chunks() {
		if err != nil {
			fmt.Println("\nerror:", err)
			break
		}
		fmt.Print(c.text)
	}
	res := stream.Result()
	fmt.Println()
	fmt.Println("tier:", res.Tier, "complete:", res.Complete, "chunks:", res.Chunks, "finish:", res.FinishReason)
	// Output:
	// Rayleigh scattering.
	// tier: flash complete: true chunks: 2 finish: STOP
}

// Hedging the primary on the next tier: after 50 ms without an answer a
// second call starts on flash, and the first answer wins.
func ExampleHedge() {
	slow := fallback.Tier("pro", func(ctx context.Context, _ string) (string, error) {
		select {
		case <-time.After(time.Second):
			return "pro", nil
		case <-ctx.Done():
			return "", ctx.Err()
		}
	})
	flash := fallback.Tier("flash", func(context.Context, string) (string, error) { return "flash", nil })
	chain, err := fallback.New(fallback.Config[string, string]{Stages: []fallback.Stage[string, string]{
		{Tier: slow, Hedge: fallback.Hedge{Delay: 50 * time.Millisecond, MaxExtra: 1}},
		{Tier: flash},
	}})
	if err != nil {
		panic(err)
	}
	res, _ := chain.Do(context.Background(), "q")
	fmt.Println(res.Value, res.Degraded, res.UpstreamCalls)
	// Output: flash true 2
}

// A tier reports what each upstream response cost, as it reads it; the
// report reaches the chain's observers through whatever wraps the tier.
func ExampleReport() {
	pro := fallback.Tier("pro", func(ctx context.Context, q string) (string, error) {
		// ... the SDK call; then, for the response it returned:
		fallback.Report(ctx, fallback.Reply{
			Usage:    fallback.Usage{InputTokens: 120, OutputTokens: 30},
			HasUsage: true,
			Response: fallback.ResponseInfo{Model: "gemini-2.5-pro-001", FinishReason: "STOP"},
		})
		return "an answer", nil
	})
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages:   []fallback.Stage[string, string]{{Tier: fallback.MapTier(pro, func(s string) string { return s })}},
		Observer: usagePrinter{},
	})
	if err != nil {
		panic(err)
	}
	_, _ = chain.Do(context.Background(), "q")
	// Output:
	// pro 120 30 gemini-2.5-pro-001
}

// usagePrinter prints what each attempt reported. It embeds
// fallback.NopObserver and handles only the events it needs: the others
// cost nothing.
type usagePrinter struct{ fallback.NopObserver }

func (usagePrinter) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	u := e.Reply.Usage
	fmt.Println(e.Stage.Tier, u.InputTokens, u.OutputTokens, e.Reply.Response.Model)
}

// attemptLogger is an observer that handles AttemptEnded only: one line
// per upstream call, with its outcome and what follows it.
type attemptLogger struct{ fallback.NopObserver }

func (attemptLogger) AttemptEnded(_ context.Context, e fallback.AttemptEnd) {
	switch {
	case e.Verdict.Class == classify.OK:
		fmt.Printf("%s #%d answered\n", e.Stage.Tier, e.Attempt)
	case e.Retry:
		fmt.Printf("%s #%d %s, retrying\n", e.Stage.Tier, e.Attempt, e.Verdict.Class)
	default:
		fmt.Printf("%s #%d %s, %s\n", e.Stage.Tier, e.Attempt, e.Verdict.Class, e.Route)
	}
}

// An observer embeds NopObserver and implements the methods of the events
// it handles; here, only the end of each attempt.
func ExampleObserver() {
	calls := 0
	pro := fallback.Tier("pro", func(ctx context.Context, q string) (string, error) {
		return "", errOverloaded
	})
	flash := fallback.Tier("flash", func(ctx context.Context, q string) (string, error) {
		if calls++; calls == 1 {
			return "", errOverloaded
		}
		return "an answer", nil
	})
	chain, err := fallback.New(fallback.Config[string, string]{
		Stages: []fallback.Stage[string, string]{
			{Tier: pro, Retry: retry.Policy{MaxAttempts: 1}},
			{Tier: flash, Retry: retry.Policy{MaxAttempts: 2, BaseDelay: time.Millisecond}},
		},
		Observer: attemptLogger{},
	})
	if err != nil {
		panic(err)
	}
	res, _ := chain.Do(context.Background(), "q")
	fmt.Println(res.Value)
	// Output:
	// pro #1 transient, next_tier
	// flash #1 transient, retrying
	// flash #2 answered
	// an answer
}

// Who a request is for is set once, where it enters the service; the
// cache's scope, otelx, chaos rules and routes read it from the context.
func ExampleWithRequest() {
	ctx := fallback.WithRequest(context.Background(), fallback.Request{ID: "req-42", Tenant: "acme", Scenario: "support"})
	r := fallback.RequestFrom(ctx)
	fmt.Println(r.ID, r.Tenant, r.Scenario)
	fmt.Printf("%q\n", fallback.RequestFrom(context.Background()).Tenant)
	// Output:
	// req-42 acme support
	// ""
}
