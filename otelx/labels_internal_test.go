package otelx

import (
	"hash/maphash"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/attribute"
)

// Two combinations of labels under one hash are told apart by their
// values; values of a kind the cache does not hold get no profile.
func TestLabelProfilesTellCollisionsApart(t *testing.T) {
	p := &labelProfiles{seed: maphash.MakeSeed()}
	acme := []attribute.KeyValue{KeyTenant.String("acme")}
	globex := []attribute.KeyValue{KeyTenant.String("globex")}
	a := p.of(acme)
	require.NotNil(t, a)
	// Put globex's profile under acme's hash, as a collision would.
	h, ok := p.hashLabels(acme)
	require.True(t, ok)
	g := &labelProfile{extra: globex}
	m := map[uint64][]*labelProfile{h: {g, a}}
	p.byHash.Store(&m)
	assert.Same(t, a, p.of(acme))
	assert.NotSame(t, g, p.of(globex), "globex hashes elsewhere: a profile of its own")
	assert.Nil(t, p.of([]attribute.KeyValue{attribute.StringSlice("team", []string{"a"})}))
	base := newAttrs(attribute.String("k", "v"))
	s := a.merged(p, base)
	require.NotNil(t, s)
	assert.Same(t, s, a.merged(p, base))
	v, ok := s.set.Value(KeyTenant)
	assert.True(t, ok)
	assert.Equal(t, "acme", v.AsString())
}

// Past their bounds the caches make nothing more: the caller builds its
// sets as it goes.
func TestLabelCachesAreBounded(t *testing.T) {
	p := &labelProfiles{seed: maphash.MakeSeed()}
	for i := range maxProfiles {
		require.NotNil(t, p.of([]attribute.KeyValue{KeyTenant.String(strconv.Itoa(i))}))
	}
	assert.Nil(t, p.of([]attribute.KeyValue{KeyTenant.String("one-too-many")}))
	assert.NotNil(t, p.of([]attribute.KeyValue{KeyTenant.String("7")}), "a cached profile is still found")

	lp := p.of([]attribute.KeyValue{KeyTenant.String("7")})
	p.merged.Store(maxMergedSets)
	assert.Nil(t, lp.merged(p, newAttrs(attribute.String("k", "v"))))

	var ms memberSets
	base := newAttrs(attribute.String("k", "v"))
	for i := range maxMemberSets {
		require.NotNil(t, ms.get(base, memberKey{member: strconv.Itoa(i)}))
	}
	assert.Nil(t, ms.get(base, memberKey{member: "one-too-many"}))
}
