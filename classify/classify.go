package classify

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"
	"time"
)

// Classifier turns an error into a Verdict. Implementations must be safe for
// concurrent use and must not copy upstream text into Verdict.Reason.
type Classifier interface {
	// Classify returns err's verdict; class OK for a nil error.
	Classify(err error) Verdict
}

// Func adapts a function to the Classifier interface.
type Func func(err error) Verdict

// Classify calls f(err).
func (f Func) Classify(err error) Verdict { return f(err) }

// Rule recognises one kind of error — typically an SDK's error type — and
// classifies it. It returns false for errors it does not know, so the next
// rule, and finally the built-in understanding, gets its turn. A rule for an
// HTTP-shaped error usually extracts Facts and returns FromFacts(facts).
type Rule func(err error) (Verdict, bool)

// Standard is the built-in classifier, extended by rules. Its zero value is
// ready to use and is what the package-level Classify uses.
type Standard struct {
	rules []Rule
	now   func() time.Time
}

// New returns a Standard classifier that consults rules in order before its
// built-in understanding. This is how an SDK adapter teaches tierguard its
// error type without the root module importing the SDK.
func New(rules ...Rule) Standard {
	return Standard{rules: append([]Rule(nil), rules...)}
}

// Classify classifies err; see the package documentation for what it
// understands and in which order.
func (s Standard) Classify(err error) Verdict {
	if err == nil {
		return Verdict{Class: OK}
	}
	var cv Classified
	if errors.As(err, &cv) {
		return failure(cv.Verdict())
	}
	if errors.Is(err, context.Canceled) {
		return Verdict{Class: Canceled, Reason: "canceled"}
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return Verdict{Class: DeadlineExhausted, Reason: "deadline exceeded"}
	}
	for _, r := range s.rules {
		if v, ok := r(err); ok {
			return failure(v)
		}
	}
	now := time.Now
	if s.now != nil {
		now = s.now
	}
	var he *HTTPError
	if errors.As(err, &he) {
		return fromFacts(he.Facts, now)
	}
	var sc interface{ StatusCode() int }
	if errors.As(err, &sc) {
		f := Facts{HTTPStatus: sc.StatusCode()}
		var ra interface{ RetryAfter() time.Duration }
		if errors.As(err, &ra) {
			f.RetryAfter = ra.RetryAfter()
		}
		return fromFacts(f, now)
	}
	if v, ok := transport(err); ok {
		return v
	}
	return Verdict{Class: Unknown, Reason: "unrecognised error"}
}

var standard Standard

// failure makes sure the verdict of an error is a failure: a rule or an
// attached verdict that leaves Class at its zero value, OK, would have a
// failed call counted as a success (by a breaker, by a retry budget).
func failure(v Verdict) Verdict {
	if v.Class == OK {
		v.Class, v.Reason = Unknown, "error classified as ok"
	}
	return v
}

// Classify classifies err with the built-in classifier and no rules.
func Classify(err error) Verdict { return standard.Classify(err) }

// transport recognises connection-level failures. They are transient: the
// next attempt gets a new connection.
func transport(err error) (Verdict, bool) {
	switch {
	case errors.Is(err, syscall.ECONNRESET):
		return Verdict{Class: Transient, Reason: "connection reset"}, true
	case errors.Is(err, syscall.ECONNREFUSED):
		return Verdict{Class: Transient, Reason: "connection refused"}, true
	case errors.Is(err, syscall.EPIPE):
		return Verdict{Class: Transient, Reason: "broken pipe"}, true
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return Verdict{Class: Transient, Reason: "connection closed mid-response"}, true
	}
	var ne net.Error
	if errors.As(err, &ne) {
		if ne.Timeout() {
			return Verdict{Class: Transient, Reason: "network timeout"}, true
		}
		return Verdict{Class: Transient, Reason: "network error"}, true
	}
	return Verdict{}, false
}

// Facts are what an HTTP-shaped error says about the response that caused
// it. SDK adapters fill them from their error types and call FromFacts.
type Facts struct {
	// HTTPStatus is the response's status code; 0 when unknown (a JSON error
	// without "code", for example).
	HTTPStatus int
	// Status is the error's status string: a canonical Google status
	// ("UNAVAILABLE") or the "NNN Text" form of a non-JSON body
	// ("502 Bad Gateway"). Used when HTTPStatus is 0.
	Status string
	// Code is an API's string error code, as OpenAI and the gateways that
	// follow it send ("insufficient_quota", "context_length_exceeded",
	// "content_filter", "model_not_found"), or the error's type when it has
	// no code.
	Code string
	// Message is the upstream error message. It is only searched for hints
	// (a retry delay, a daily quota, a context overflow, billing, the model
	// a 404 names); it never reaches the Verdict's text.
	Message string
	// Details are google.rpc error details decoded from JSON.
	Details []map[string]any
	// RetryAfter is a delay already read from the response (a parsed
	// Retry-After or retry-after-ms header).
	RetryAfter time.Duration
	// RetryAfterHeader is a raw Retry-After header value, parsed against the
	// current time (delta-seconds or HTTP-date).
	RetryAfterHeader string
	// RetryAfterMsHeader is a raw retry-after-ms header value (milliseconds,
	// possibly fractional), as OpenAI and Azure OpenAI send it; it wins over
	// Retry-After when both are given, as in their SDKs.
	RetryAfterMsHeader string
}

// LongRetryAfter is the delay from which a 429 counts as QuotaExhausted
// rather than RateLimited: a server that asks to wait this long (RetryInfo
// of hours, "try again in 114h18m0s") is not going to answer within any
// request's deadline, so the tier is parked for that long instead of every
// later request paying one more call and one more breaker count.
const LongRetryAfter = 5 * time.Minute

// FromFacts classifies an HTTP-shaped failure described by f. It is the
// decision logic of the Standard classifier, exported for rules.
func FromFacts(f Facts) Verdict { return fromFacts(f, time.Now) }

func fromFacts(f Facts, now func() time.Time) Verdict {
	code := f.HTTPStatus
	if code == 0 {
		code = httpFromStatus(f.Status)
	}
	if code == 0 {
		// An error event inside a stream carries no HTTP status, often only
		// a string code ("server_error"): the status the API answers that
		// code with decides, as it would have outside a stream.
		code = httpFromCode(f.Code)
	}
	status := canonicalStatus(f.Status)
	if status == "" {
		status = statusForHTTP(code)
	}
	v := Verdict{HTTPStatus: code, Status: status}
	lower := &lazyLower{msg: f.Message}

	d := readDetails(f.Details)
	v.RetryAfter = f.RetryAfter
	if ms, ok := parseRetryAfterMillis(f.RetryAfterMsHeader); ok {
		v.RetryAfter = max(v.RetryAfter, ms)
	} else if f.RetryAfterHeader != "" {
		if ra, ok := parseRetryAfter(f.RetryAfterHeader, now()); ok {
			v.RetryAfter = max(v.RetryAfter, ra)
		}
	}
	if d.hasRetryDelay {
		v.RetryAfter = max(v.RetryAfter, d.retryDelay)
	}
	v.RetryAfter = min(max(v.RetryAfter, 0), MaxRetryAfter)
	v = classifyFacts(v, f, d, code, status, lower)
	if v.Class == RateLimited || v.Class == QuotaExhausted {
		// RetryInfo is truncated to whole seconds ("37s") while the message
		// says "Please retry in 37.38s.": the larger avoids retrying early.
		// Only a quota's message is read this way: a 5xx page saying "try
		// again in 30 seconds" is boilerplate, not an instruction.
		if ra, ok := retryHint(lower.get()); ok {
			v.RetryAfter = max(v.RetryAfter, ra)
			if v.Class == RateLimited && v.RetryAfter >= LongRetryAfter {
				v.Class, v.Reason = QuotaExhausted, "retry-after beyond any deadline"
			}
		}
	}
	v.PerMinute = v.Class == RateLimited && d.perMinuteQuota
	return v
}

// classifyFacts decides the class of an HTTP-shaped failure once its
// status and delays are known.
func classifyFacts(v Verdict, f Facts, d detailFacts, code int, status string, lower *lazyLower) Verdict {

	if class, ok := knownReasons[d.reason]; ok && class == Auth {
		v.Class, v.Reason = Auth, "credentials rejected"
		return v
	}
	if f.Code == "not_found_error" {
		// Anthropic's 404 names the missing thing by its parameter: "model:
		// claude-3-5-sonnet-20241022" is a model no longer (or never)
		// served, wherever the body arrives (a gateway that relays it with
		// another status included). Without "model:" it is some other
		// resource: the status decides.
		if id, named := anthropicModel(f.Message); named {
			v.Class, v.Reason, v.Model = Retired, "model not found", id
			return v
		}
	}
	if class, reason, ok := codeClass(f.Code); ok && (class != RateLimited || code == 0 || code == 429) {
		// A rate-limit code on another status (Groq's 413 "Request too large
		// ... tokens per minute") is not a wait: the status decides.
		v.Class, v.Reason = class, reason
		switch class {
		case Retired:
			v.Model, _ = namedModel(f.Message, lower.get())
		case RateLimited:
			v = quotaOrRate(v, d, lower)
		}
		return v
	}
	switch knownReasons[d.reason] {
	case QuotaExhausted:
		v.Class, v.Reason = QuotaExhausted, "quota exhausted"
		if d.reason == "BILLING_DISABLED" {
			v.Reason = "billing disabled"
		}
		return v
	case RateLimited:
		v.Class, v.Reason = RateLimited, "rate limited"
		return quotaOrRate(v, d, lower)
	}
	switch {
	case code == 401:
		v.Class, v.Reason = Auth, "unauthenticated"
	case code == 402:
		v.Class, v.Reason = QuotaExhausted, "payment required"
	case code == 403:
		if strings.Contains(lower.get(), "billing") {
			v.Class, v.Reason = QuotaExhausted, "billing not enabled"
		} else {
			v.Class, v.Reason = Auth, "permission denied"
		}
	case code == 429:
		v.Class, v.Reason = RateLimited, "rate limited"
		v = quotaOrRate(v, d, lower)
	case code == 404:
		if id, named := relayedAnthropicModel(f.Message, lower.get()); named {
			// A gateway that put Anthropic's body into its own message
			// ("AnthropicException - b'{...not_found_error...model: x...}'").
			v.Class, v.Reason, v.Model = Retired, "model not found", id
		} else if id, named := namedModel(f.Message, lower.get()); named {
			v.Class, v.Reason, v.Model = Retired, "model not found", id
		} else {
			v.Class, v.Reason = InvalidRequest, "not found (not a model)"
		}
	case code == 413:
		v.Class, v.Reason = ContextTooLong, "request too large"
	case code == 400 || code == 422:
		switch {
		case tokenLimit(lower.get()):
			v.Class, v.Reason = ContextTooLong, "input exceeds the model's context window"
		case retiredMessage(lower.get()):
			// "The model `x` has been decommissioned and is no longer
			// supported" (Groq), "The model `x` has been deprecated"
			// (OpenAI), "x is not a valid model ID" (OpenRouter).
			// Only when it names the model: "is no longer supported" on a
			// 400 may be about a parameter.
			if id, _ := namedModel(f.Message, lower.get()); id != "" {
				v.Class, v.Reason, v.Model = Retired, "model retired", id
			} else {
				v.Class, v.Reason = InvalidRequest, "invalid request"
			}
		case strings.Contains(lower.get(), "billing") || strings.Contains(lower.get(), "credit balance"):
			// "Gemini API free tier is not available in your country. Please
			// enable billing", "User location is not supported for the API
			// use without a billing account linked" (FAILED_PRECONDITION);
			// Anthropic's "Your credit balance is too low to access the
			// Anthropic API." (an invalid_request_error, quoted with and
			// without its "Please go to Plans & Billing" tail).
			v.Class, v.Reason = QuotaExhausted, "billing not enabled"
		default:
			v.Class, v.Reason = InvalidRequest, "invalid request"
		}
	case code == 408:
		v.Class, v.Reason = Transient, "request timeout"
	case code == 409:
		v.Class, v.Reason = Transient, "aborted"
	case code == 499:
		// Gemini sends CANCELLED under heavy load, also mid-stream, while
		// the caller is still waiting. The caller's own cancel never gets
		// here: it is a context error, and the request's context decides.
		v.Class, v.Reason = Transient, "cancelled by the server"
	case code == 501:
		v.Class, v.Reason = Unknown, "not implemented"
	case code >= 500 && code <= 599:
		v.Class, v.Reason = Transient, "server error"
	case code >= 400 && code <= 499:
		v.Class, v.Reason = InvalidRequest, "client error"
	default:
		v.Class, v.Reason = Unknown, "unrecognised status"
	}
	return v
}

// quotaOrRate refines a rate limit: a quota named per day, or a delay
// beyond LongRetryAfter, makes it QuotaExhausted.
func quotaOrRate(v Verdict, d detailFacts, lower *lazyLower) Verdict {
	switch {
	case d.perDayQuota || perDayMessage(lower.get()):
		v.Class, v.Reason = QuotaExhausted, "per-day quota exhausted"
	case zeroLimit(lower.get()):
		v.Class, v.Reason = QuotaExhausted, "quota limit is zero"
	case v.RetryAfter >= LongRetryAfter:
		v.Class, v.Reason = QuotaExhausted, "retry-after beyond any deadline"
	}
	return v
}

// codeClass maps the string error codes of OpenAI and the gateways that
// follow it to the class they mean, where they are more precise than the
// HTTP status.
func codeClass(code string) (Class, string, bool) {
	switch code {
	case "":
		return 0, "", false
	case "insufficient_quota":
		return QuotaExhausted, "insufficient quota", true
	case "rate_limit_exceeded", "rate_limit_error":
		return RateLimited, "rate limited", true
	case "context_length_exceeded", "context_window_exceeded":
		return ContextTooLong, "input exceeds the model's context window", true
	case "string_above_max_length":
		// OpenAI: one input string (a message's content, a tool's
		// description) is longer than the API accepts for that field. A cap
		// on the request's shape, which no other tier lifts: the request
		// must be fixed, and a larger context window would not help.
		return InvalidRequest, "a string is longer than the API accepts", true
	case "request_too_large":
		// Anthropic's 413: the request's bytes are over the endpoint's limit
		// (32 MB for the Messages API), also when a gateway relays it.
		return ContextTooLong, "request too large", true
	case "overloaded_error":
		// Anthropic's 529, also relayed by gateways with another status.
		return Transient, "overloaded", true
	case "billing_error", "enforced_spend_limit_reached", "contract_spend_limit_reached",
		"linked_organization_spend_limit_reached":
		// Anthropic: billing (402), or a spend limit of the organisation
		// (the 429s whose error.details.error_code says so, which retrying
		// cannot lift until the limit resets or is raised).
		return QuotaExhausted, "spend or billing limit", true
	case "content_filter", "content_policy_violation", "invalid_prompt", "ResponsibleAIPolicyViolation":
		return Safety, "content policy", true
	case "model_not_found":
		return Retired, "model not found", true
	case "model_decommissioned", "invalid_model":
		// Groq's retired models ("model_decommissioned", on a 400), and
		// Mistral's type for a model it does not serve ("Invalid model: x").
		return Retired, "model retired", true
	case "invalid_api_key", "invalid_authentication", "authentication_error", "permission_error",
		"account_deactivated", "unsupported_country_region_territory":
		return Auth, "credentials rejected", true
	}
	return 0, "", false
}

// httpFromCode is the HTTP status an API answers a string error code (or
// type) with, for errors that carry no status of their own: an error event
// inside a 200 stream ({"error":{"code":"server_error"}}), where the
// non-stream answer would have had the status. The codes are the documented
// ones: OpenAI's (https://platform.openai.com/docs/guides/error-codes:
// server_error, rate_limit_exceeded and the rate-limit types tokens and
// requests, insufficient_quota, invalid_api_key, slow_down) and the error
// types Anthropic and the gateways that relay it send
// (https://docs.anthropic.com/en/api/errors; billing_error 402,
// timeout_error 504 and conflict_error 409 as anthropic-sdk-go v2.17.0's
// shared.ErrorType lists them). 0 for any other code;
// codeClass decides the rest.
func httpFromCode(code string) int {
	switch code {
	case "server_error", "api_error":
		return 500
	case "slow_down":
		return 503
	case "overloaded_error":
		return 529
	case "rate_limit_exceeded", "rate_limit_error", "tokens", "requests", "insufficient_quota":
		return 429
	case "billing_error":
		return 402
	case "timeout_error":
		return 504
	case "conflict_error":
		return 409
	case "invalid_request_error":
		return 400
	case "request_too_large":
		return 413
	case "not_found_error":
		return 404
	case "authentication_error", "invalid_api_key":
		return 401
	case "permission_error":
		return 403
	}
	return 0
}
