package classify

// Class is what kind of failure an error is. The zero value, OK, means no
// failure at all.
type Class uint8

// The classes of the class table. Their order is part of the API only in
// that OK is zero; compare classes by name, never by number.
const (
	// OK is the class of a nil error.
	OK Class = iota
	// Transient failures go away on their own: 5xx, 408, connection resets,
	// a per-try timeout while the total budget remains.
	Transient
	// RateLimited is a 429 against a short (per-minute) limit; it may be
	// retried after the server's Retry-After / RetryInfo delay.
	RateLimited
	// QuotaExhausted is a 429 that names a per-day quota, or billing; retrying
	// the same tier cannot help until the quota resets.
	QuotaExhausted
	// Retired is a model that is no longer served: a 404 NOT_FOUND for a
	// model id, or a 400 saying the model was decommissioned, deprecated or
	// is not a valid model (Groq's model_decommissioned, Mistral's
	// invalid_model).
	Retired
	// ContextTooLong is a 400 for an input over the model's token limit; a
	// tier with a larger window may still serve.
	ContextTooLong
	// InvalidRequest is any other 400 or 422: the request must be fixed.
	InvalidRequest
	// Auth is a 401, a 403, or an invalid API key: a configuration error.
	Auth
	// Safety is a blocked prompt or a candidate stopped for safety: a policy
	// decision that must not be routed around.
	Safety
	// InvalidOutput is a 200 whose answer a validator rejected.
	InvalidOutput
	// Canceled means the caller cancelled the request.
	Canceled
	// DeadlineExhausted means the request's total budget is spent.
	DeadlineExhausted
	// Rejected is a local refusal made before any upstream call: an open
	// circuit, a full bulkhead, a tier known to be retired.
	Rejected
	// Unknown is anything the classifier did not recognise.
	Unknown

	numClasses = int(Unknown) + 1
)

var classNames = [numClasses]string{
	OK:                "ok",
	Transient:         "transient",
	RateLimited:       "rate_limited",
	QuotaExhausted:    "quota_exhausted",
	Retired:           "retired",
	ContextTooLong:    "context_too_long",
	InvalidRequest:    "invalid_request",
	Auth:              "auth",
	Safety:            "safety",
	InvalidOutput:     "invalid_output",
	Canceled:          "canceled",
	DeadlineExhausted: "deadline_exhausted",
	Rejected:          "rejected",
	Unknown:           "unknown",
}

// String returns the class's snake_case name, suitable as a low-cardinality
// metric attribute (it is what otelx reports as error.type).
func (c Class) String() string {
	if int(c) < numClasses {
		return classNames[c]
	}
	return "invalid_class"
}

// Classes returns every class, OK first, in table order.
func Classes() []Class {
	cs := make([]Class, numClasses)
	for i := range cs {
		cs[i] = Class(i)
	}
	return cs
}
