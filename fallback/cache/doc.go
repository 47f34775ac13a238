// Package cache is the last line of defence of a fallback chain: when every
// model tier has failed, it answers from what the tiers answered before.
//
// A Cache matches a request three ways, cheapest first:
//
//   - exact: the same prompt, after white space and case normalisation
//     (Config.Normalize);
//   - template: a prompt of the same template — the prompt with its
//     variable parts (URLs, quoted strings, dates, ids, numbers, or the
//     Slots you give) replaced by placeholders — whose values agree on
//     every slot that is not Free, or whose answer TemplateConfig.Refill
//     adapts to the new values;
//   - semantic: a prompt whose embedding's cosine similarity reaches
//     SemanticConfig.Threshold (0.95), and, below it, down to an optional
//     SimplifiedThreshold, a similar prompt whose answer is served marked
//     as simplified, so that the UI can label it.
//
// Get says which (HitExact, HitTemplate, HitSemantic, HitSimplified); the
// chain reports it in fallback.Result.CacheHit, and otelx counts hits by
// kind.
//
// Only answers that came from a tier and passed its validator are written:
// the chain writes back through the Cache's Put. Entries live
// Config.TTL (24h), the memory they hold is bounded in bytes
// (Config.MaxBytes, 64 MiB, CLOCK eviction), and each tenant and scenario
// (Scope, from the context by default) has entries of its own: an answer
// made for one tenant is never served to another unless
// Config.ShareAcrossTenants says so. Invalidate, InvalidateTenant and
// InvalidateModel drop entries.
//
// Template matching costs one scan of the prompt per slot, linear in its
// length, on the request's goroutine: it stops when the request's context
// ends (a lookup then gets exact matches only, a write-back caches its
// answer without a template), and a prompt longer than
// TemplateConfig.MaxPrompt (4 KiB) is not searched at all, only counted
// (Stats.TemplateTooLong). A 1 MiB prompt costs a lookup and a write-back
// a few milliseconds of CPU, for normalising and hashing it. The work on a
// long prompt goes 16 KiB at a time — each slot's scan too — and checks
// the context between: past the deadline it holds the request for 16 KiB
// of work at most, whatever the prompt's length and MaxPrompt. A
// write-back whose context ends before its prompt is read is not cached
// (Stats.WritesCut). The chain writes back within the context it passes
// to Put; its own Total counts only if that context carries it.
//
// The semantic layer embeds each written prompt on the cache's own
// goroutine, and a looked-up prompt inside the request's deadline, under a
// deadline of its own (SemanticConfig.Timeout, 300ms) and a breaker: an
// embedder that is down, slow or tripped costs a lookup its semantic layer,
// never its exact and template matches, and never holds the answer past
// the deadline. Embedding usage — tokens when the API reports them (the
// embedders of fallback/gemini and fallback/oaicompat do), characters
// always — goes to SemanticConfig.Usage, a UsageRecorder: a *spend.Ledger
// (which bills each call to the request's tenant and counts it against
// the tenant's limits), or one of yours (UsageFunc adapts a function); its
// context carries the request's fallback.Request, so the tenant is known.
//
// ForStream makes a cache of string answers a fallback.StreamConfig.Cache:
// it answers with one chunk when no tier could start a stream, and is
// written the text of every complete, validated stream.
//
// The default index (Exact) compares a lookup with every vector of its
// scope; package hnsw is an approximate index for scopes of many
// thousands of entries. A Store (package redisstore) shares entries and
// their embeddings between processes; lookups never wait for it.
package cache
