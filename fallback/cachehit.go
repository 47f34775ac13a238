package fallback

import "context"

// CacheHit says how a cache matched the request it answered, so that a
// service can label an approximate answer and a dashboard can count hits by
// kind.
type CacheHit uint8

const (
	// CacheHitUnknown: the answer did not come from a cache, or came from
	// one that does not say how it matched.
	CacheHitUnknown CacheHit = iota
	// CacheHitExact: a stored answer to the same prompt, after whitespace
	// and case normalisation.
	CacheHitExact
	// CacheHitTemplate: a stored answer to a prompt of the same template
	// (the prompt with its variable parts — numbers, dates, ids — replaced
	// by placeholders) that the cache could reuse for this prompt's values.
	CacheHitTemplate
	// CacheHitSemantic: a stored answer to a prompt whose meaning the
	// cache's similarity threshold counts as the same question.
	CacheHitSemantic
	// CacheHitSimplified: a stored answer to a similar, not the same,
	// question (a lower similarity threshold). Label it in the UI as an
	// approximate answer.
	CacheHitSimplified
)

var cacheHitNames = [...]string{
	CacheHitUnknown: "unknown", CacheHitExact: "exact", CacheHitTemplate: "template",
	CacheHitSemantic: "semantic", CacheHitSimplified: "simplified",
}

// String returns "unknown", "exact", "template", "semantic" or
// "simplified".
func (h CacheHit) String() string { return name(cacheHitNames[:], h, "invalid_cache_hit") }

// CacheMatcher is implemented by caches that say how they matched. When
// Config.Cache (or StreamConfig.Cache) implements it, the chain calls Match
// instead of Get and reports the hit in Summary.CacheHit and on the
// LocalAnswered and RequestEnded events.
type CacheMatcher[In, Out any] interface {
	// Match returns a cached answer for in and how it matched.
	Match(ctx context.Context, in In) (Out, CacheHit, bool)
}
