package classify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
)

// TestAnErrorNeverClassifiesAsOK: a rule or an attached verdict that leaves
// Class at its zero value must not turn a failed call into a success (a
// breaker would count it as healthy). Found by the chaos soak's fuzzing of
// error chains.
func TestAnErrorNeverClassifiesAsOK(t *testing.T) {
	v := classify.Classify(classify.Wrap(errors.New("teapot"), classify.Verdict{HTTPStatus: 418}))
	assert.Equal(t, classify.Unknown, v.Class)
	assert.Equal(t, 418, v.HTTPStatus, "the rest of the verdict is kept")

	v = classify.Classify(classify.Wrap(nil, classify.Verdict{}))
	assert.Equal(t, classify.Unknown, v.Class)

	sloppy := classify.New(func(error) (classify.Verdict, bool) { return classify.Verdict{HTTPStatus: 418}, true })
	assert.Equal(t, classify.Unknown, sloppy.Classify(errors.New("teapot")).Class)
	assert.Equal(t, classify.OK, sloppy.Classify(nil).Class, "nil stays a success")
}

// TestInvalidUTF8InStatusAndMessage: a response whose status and message
// are not UTF-8 still classifies, and the verdict carries none of it.
func TestInvalidUTF8InStatusAndMessage(t *testing.T) {
	for _, f := range []classify.Facts{
		{HTTPStatus: 503, Status: "UNAVAIL\xffABLE", Message: "\xfe\xff overloaded \xc3\x28"},
		{Status: "\xff\xfe\xfd", Message: "\xff"},
		{Status: "5\xff3 Bad Gateway"},
		{HTTPStatus: 429, Status: "RESOURCE_EXHAUSTED", Message: "Please retry in \xff5s."},
		{HTTPStatus: 400, Message: "The input token count \xff exceeds the maximum"},
	} {
		v := classify.FromFacts(f)
		assert.NotEqual(t, classify.OK, v.Class)
		assert.True(t, utf8.ValidString(v.String()), "%q", v.String())
		assert.NotContains(t, v.String(), "\xff")
		assert.True(t, v.Status == "" || isCanonical(v.Status), "%q", v.Status)
	}
	body := "{\"error\":{\"code\":503,\"status\":\"UNAV\xffAILABLE\",\"message\":\"\xff\xfe\"}}"
	v := classify.Classify(classify.ReadResponse(context.Background(), response(503, body)))
	assert.Equal(t, classify.Transient, v.Class)
	assert.Equal(t, "UNAVAILABLE", v.Status, "derived from the code, not copied")
	he := classify.ReadResponse(context.Background(), response(503, body))
	assert.True(t, utf8.ValidString(he.Error()))
}

// TestHostileDetailsAreBounded: details of the wrong types, nested deep or
// huge, classify at a fixed cost and never as something they are not.
func TestHostileDetailsAreBounded(t *testing.T) {
	nest := func(depth int) any {
		var v any = "37s"
		for range depth {
			v = []any{map[string]any{"retryDelay": v}}
		}
		return v
	}
	details := []map[string]any{
		{"@type": 5, "retryDelay": "37s"},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": 37.0},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": []any{"37s"}},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "-5s"},
		{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "1e308s"},
		{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": "PerDay"},
		{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": []any{nil, 1, "x", nest(10000)}},
		{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": map[string]any{"x": "API_KEY_INVALID"}},
		{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": strings.Repeat("API_KEY_INVALID", 1000)},
		{"@type": "type.googleapis.com/google.rpc.Help", "deep": nest(100000)},
		nil,
	}
	start := time.Now()
	v := classify.FromFacts(classify.Facts{HTTPStatus: 429, Details: details})
	assert.Less(t, time.Since(start), time.Second)
	assert.Equal(t, classify.RateLimited, v.Class, "none of it is a per-day quota or a credential problem")
	assert.Zero(t, v.RetryAfter, "no well-formed delay was given")

	v = classify.FromFacts(classify.Facts{HTTPStatus: 429, RetryAfter: -time.Hour, RetryAfterHeader: "1000000000",
		Details: []map[string]any{{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "99999999999999999999s"}}})
	assert.Equal(t, classify.MaxRetryAfter, v.RetryAfter)
}
