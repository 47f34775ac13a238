package classify_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tierguard/tierguard/classify"
)

// A 429 from Gemini with RetryInfo: rate limited, retry after 37s, and the
// default table says to retry (if the wait fits the budget) and count the
// failure toward the breaker.
func Example() {
	body := `{"error":{"code":429,"message":"You exceeded your current quota.","status":"RESOURCE_EXHAUSTED",
	  "details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"37s"}]}}`
	resp := &http.Response{StatusCode: 429, Header: http.Header{}, Body: io.NopCloser(strings.NewReader(body))}

	v := classify.Classify(classify.ReadResponse(context.Background(), resp))
	a := classify.DefaultTable().Action(v.Class)
	fmt.Println(v)
	fmt.Println("retry:", a.Retry, "breaker failure:", a.BreakerFailure, "then:", a.Route)
	// Output:
	// rate_limited (429 RESOURCE_EXHAUSTED, retry after 37s): rate limited
	// retry: true breaker failure: true then: next_tier
}

// vendorError stands for an SDK's error type.
type vendorError struct{ Code int }

func (e vendorError) Error() string { return "vendor error" }

// An SDK adapter teaches the classifier its error type with a Rule.
func ExampleNew() {
	rule := func(err error) (classify.Verdict, bool) {
		var e vendorError
		if !errors.As(err, &e) {
			return classify.Verdict{}, false
		}
		return classify.FromFacts(classify.Facts{HTTPStatus: e.Code}), true
	}
	c := classify.New(rule)
	fmt.Println(c.Classify(vendorError{Code: 503}).Class)
	// Output: transient
}
