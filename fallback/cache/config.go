package cache

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tierguard/tierguard/breaker"
)

// Defaults applied to zero fields of Config and SemanticConfig.
const (
	defaultTTL            = 24 * time.Hour
	defaultMaxBytes       = 64 << 20
	defaultPerTemplate    = 8
	defaultMaxPrompt      = 4 << 10
	defaultThreshold      = 0.95
	defaultEmbedTimeout   = 300 * time.Millisecond
	defaultMinEmbedBudget = 20 * time.Millisecond
	defaultQueue          = 256
	defaultCandidates     = 4
)

// MaxTTL is the longest Config.TTL accepted: ten years. No model's answer
// stays right longer, and an expiry past the year 2262 cannot be held in
// nanoseconds (a TTL of math.MaxInt64 expired every entry at once).
const MaxTTL = 10 * 365 * 24 * time.Hour

// Config configures a Cache. Only Prompt is required: the zero values give
// an exact and template cache of 64 MiB whose entries live 24 hours, each
// tenant and scenario apart.
type Config[In, Out any] struct {
	// Prompt returns the text a request is matched on: the user's
	// question, or the variable part of the prompt. Required.
	Prompt func(in In) string
	// Scope returns a request's scope; nil means the tenant and scenario
	// of the request's fallback.Request (fallback.RequestFrom). It sees
	// the context the chain passes to the cache (the request's, with its
	// values), both when an answer is written and when one is looked up.
	Scope func(ctx context.Context, in In) Scope
	// ShareAcrossTenants serves one tenant's answers to every tenant. Off
	// by default: turn it on only for answers that hold nothing a tenant
	// may not see (public facts, product descriptions).
	ShareAcrossTenants bool
	// ShareAcrossScenarios serves one scenario's answers to every
	// scenario of the same tenant.
	ShareAcrossScenarios bool

	// Model returns the model that produced an answer, for
	// InvalidateModel; nil leaves entries without a model.
	Model func(out Out) string
	// Size returns the bytes an answer holds in memory. nil measures a
	// string or []byte answer by its length and any other by the length of
	// its Codec encoding.
	Size func(out Out) int
	// Codec encodes answers for a Store (and measures them, see Size).
	// nil means encoding/json.
	Codec Codec[Out]

	// TTL is how long an answer is served after it was written. 0 means
	// 24h; at most MaxTTL.
	TTL time.Duration
	// MaxBytes bounds the memory the entries hold: their prompts, keys,
	// answers and embeddings. Past it the least recently used entries are
	// evicted (a CLOCK approximation of LRU), and an entry above a
	// sixteenth of MaxBytes is not cached at all. 0 means 64 MiB.
	MaxBytes int64

	// Normalize maps a prompt to its exact-match key; nil means
	// NormalizeText (white space collapsed, lower case). Use the identity
	// function for a case-sensitive cache.
	Normalize func(string) string
	// Template configures the template layer.
	Template TemplateConfig[Out]
	// Semantic configures the semantic layer; it is off without an
	// Embedder.
	Semantic SemanticConfig

	// Store shares entries and their embeddings with other processes (see
	// package redisstore); nil keeps the cache local.
	Store Store
}

// TemplateConfig configures the template layer: a prompt whose variable
// parts (numbers, dates, quoted strings, ids, URLs, or the Slots given)
// are replaced by placeholders is a template, and an answer written for
// one prompt serves another prompt of the same template when the values
// that matter are the same (free slots do not matter), or when Refill
// adapts it to the new values.
type TemplateConfig[Out any] struct {
	// Disabled turns the template layer off.
	Disabled bool
	// Slots are the variable parts to look for, tried before the built-in
	// ones (see Builtins), in order: an earlier slot's match wins an
	// overlap.
	Slots []Slot
	// NoBuiltins leaves the built-in slots out.
	NoBuiltins bool
	// Refill adapts an answer stored for another prompt of the same
	// template to this prompt's values (stored and query list each
	// prompt's values in order), or returns false when it cannot. nil
	// reuses an answer only when every value of a slot that is not Free is
	// the same. SubstituteVars is a Refill for answers that quote the
	// values.
	Refill func(ctx context.Context, out Out, stored, query []Var) (Out, bool)
	// MaxPerTemplate bounds the answers kept per template and scope for
	// other values; the oldest leaves the template list (not the cache).
	// 0 means 8.
	MaxPerTemplate int
	// MaxPrompt is the longest prompt, in bytes, the template layer
	// searches for variable parts. A longer prompt is looked up and
	// written back as an exact entry only, and Stats.TemplateTooLong
	// counts it; unless Semantic.KeepVariables, it is neither embedded nor
	// matched by meaning either, since its values cannot be compared.
	// Matching is linear in the prompt, one scan per slot: the built-in
	// slots cost about half a microsecond per byte on a small VM, 2 ms at
	// the default. A prompt above 16 KiB is scanned in windows of at most
	// that, cut after a line break (or else a space) where one is near, so
	// that the request's context is checked between them: a value that
	// spans a cut is not read whole. 0 means 4 KiB.
	MaxPrompt int
}

// SemanticConfig configures the semantic layer: prompts are embedded, and
// a request whose embedding's cosine similarity to a stored prompt's
// reaches Threshold is answered with that prompt's answer.
type SemanticConfig struct {
	// Embedder embeds prompts; nil turns the semantic layer off.
	Embedder Embedder
	// Threshold is the least cosine similarity that counts as the same
	// question. 0 means 0.95.
	Threshold float64
	// SimplifiedThreshold, when set (below Threshold), serves answers to
	// similar questions too, reported as HitSimplified so
	// that the UI can label them. 0 means none.
	SimplifiedThreshold float64
	// KeepVariables serves a similar prompt's answer even when the two
	// prompts' template values differ. By default they must agree: "price
	// of product 123" and "price of product 456" embed close together,
	// and must not share an answer.
	KeepVariables bool

	// Timeout caps each embedding call; the request's deadline applies
	// too, and the earlier wins. 0 means 300ms.
	Timeout time.Duration
	// MinBudget is the least time a lookup must have left to embed its
	// prompt; with less, the semantic layer is skipped at once. 0 means
	// 20ms.
	MinBudget time.Duration
	// Breaker stops embedding calls while the embedder fails, so that a
	// lookup falls back to exact and template matches without waiting;
	// nil means a breaker of its own with the breaker package's defaults
	// (5 failures in a row, 30s open).
	Breaker *breaker.Breaker
	// NewIndex makes the index of one scope, for embeddings of dims
	// dimensions; nil means NewExact.
	NewIndex func(dims int) Index
	// Usage receives the token usage of every embedding call — a spend
	// ledger; nil records nothing.
	Usage UsageRecorder
	// Queue bounds the written answers waiting for their embedding (and,
	// with a Store, to be shared); past it they are cached without one.
	// 0 means 256.
	Queue int
}

func (cfg *Config[In, Out]) check() error {
	var errs []error
	if cfg.Prompt == nil {
		errs = append(errs, errors.New("missing Prompt"))
	}
	switch {
	case cfg.TTL < 0:
		errs = append(errs, fmt.Errorf("negative TTL %v", cfg.TTL))
	case cfg.TTL > MaxTTL:
		errs = append(errs, fmt.Errorf("TTL %v is longer than MaxTTL (%v)", cfg.TTL, MaxTTL))
	}
	if cfg.MaxBytes < 0 {
		errs = append(errs, fmt.Errorf("negative MaxBytes %d", cfg.MaxBytes))
	}
	if cfg.Template.MaxPrompt < 0 {
		errs = append(errs, fmt.Errorf("negative Template.MaxPrompt %d", cfg.Template.MaxPrompt))
	}
	if cfg.Template.MaxPerTemplate < 0 {
		errs = append(errs, fmt.Errorf("negative Template.MaxPerTemplate %d", cfg.Template.MaxPerTemplate))
	}
	for i, s := range cfg.Template.Slots {
		if s.Pattern == nil {
			errs = append(errs, fmt.Errorf("Template.Slots[%d] (%q): Pattern is required", i, s.Name))
		}
		if s.Name == "" {
			errs = append(errs, fmt.Errorf("Template.Slots[%d]: Name is required", i))
		}
	}
	s := &cfg.Semantic
	th, simp := s.threshold(), s.SimplifiedThreshold
	if math.IsNaN(s.Threshold) || s.Threshold < 0 || s.Threshold > 1 {
		errs = append(errs, fmt.Errorf("Semantic.Threshold %v must be in (0, 1]", s.Threshold))
	}
	if math.IsNaN(simp) || simp < 0 || (simp > 0 && simp >= th) {
		errs = append(errs, fmt.Errorf("Semantic.SimplifiedThreshold %v must be in (0, Threshold %v)", simp, th))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"Semantic.Timeout", s.Timeout}, {"Semantic.MinBudget", s.MinBudget}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("negative %s %v", d.name, d.v))
		}
	}
	if s.Queue < 0 {
		errs = append(errs, fmt.Errorf("negative Semantic.Queue %d", s.Queue))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cache: invalid config: %w", err)
	}
	return nil
}

func (s *SemanticConfig) threshold() float64 {
	if s.Threshold == 0 {
		return defaultThreshold
	}
	return s.Threshold
}

func orDuration(v, def time.Duration) time.Duration {
	if v == 0 {
		return def
	}
	return v
}

func orInt[T int | int64](v, def T) T {
	if v == 0 {
		return def
	}
	return v
}
