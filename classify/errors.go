package classify

// Classified is implemented by errors that carry their own verdict: local
// rejections (an open circuit, a full bulkhead), validation failures, and
// errors made by SDK adapters. The Standard classifier trusts it first.
type Classified interface {
	error
	// Verdict returns the error's own verdict.
	Verdict() Verdict
}

// Error is an error with an explicit verdict, wrapping an optional cause.
type Error struct {
	// V is the verdict.
	V Verdict
	// Err is the cause; it may be nil.
	Err error
}

// Wrap returns err with the verdict v attached; errors.Is and errors.As see
// err through it. Wrap(nil, v) is an error too: a failure with no cause
// other than the verdict (e.g. a blocked prompt on a 200).
func Wrap(err error, v Verdict) error { return &Error{V: v, Err: err} }

// Error describes the verdict, then the cause.
func (e *Error) Error() string {
	if e.Err == nil {
		return "tierguard: " + e.V.String()
	}
	return "tierguard: " + e.V.String() + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Verdict returns the attached verdict.
func (e *Error) Verdict() Verdict { return e.V }
