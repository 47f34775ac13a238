package validate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tierguard/tierguard/classify"
)

// Validator checks a tier's answer before it counts as a success. A
// rejected answer moves the request to the next tier and does not count
// against the tier's circuit breaker: the transport was healthy.
type Validator[Out any] interface {
	// Validate returns nil for an acceptable answer, or an error — ideally
	// an *Error — that says why not without quoting the answer.
	Validate(out Out) error
}

// Func adapts a function to the Validator interface.
type Func[Out any] func(out Out) error

// Validate calls f(out).
func (f Func[Out]) Validate(out Out) error { return f(out) }

// Error is a rejected answer. Its text names the rule and a short reason
// (a field, a limit, an offset) but never the answer itself, so it is safe
// to log. It classifies as classify.InvalidOutput.
type Error struct {
	// Rule names the validator: "non_empty", "max_length", "json",
	// "json_schema", "decode", or a name of your own.
	Rule string
	// Reason says what is wrong, without the answer's text.
	Reason string
	// Err is an underlying error, when there is one worth unwrapping (for
	// json.UnmarshalTypeError, for example). Its text is not included in
	// Error().
	Err error
}

// Errorf returns an *Error for rule with a formatted reason. Do not format
// the answer's text into the reason.
func Errorf(rule, format string, args ...any) *Error {
	return &Error{Rule: rule, Reason: fmt.Sprintf(format, args...)}
}

// Error returns "invalid output (rule): reason".
func (e *Error) Error() string {
	if e.Reason == "" {
		return "tierguard: invalid output (" + e.Rule + ")"
	}
	return "tierguard: invalid output (" + e.Rule + "): " + e.Reason
}

// Unwrap returns the underlying error.
func (e *Error) Unwrap() error { return e.Err }

// Verdict classifies a rejected answer as InvalidOutput.
func (e *Error) Verdict() classify.Verdict {
	return classify.Verdict{Class: classify.InvalidOutput, Reason: "output rejected by " + e.Rule}
}

// All runs validators in order and returns the first rejection.
func All[Out any](vs ...Validator[Out]) Validator[Out] {
	vs = append([]Validator[Out](nil), vs...)
	return Func[Out](func(out Out) error {
		for _, v := range vs {
			if err := v.Validate(out); err != nil {
				return err
			}
		}
		return nil
	})
}

// Each runs every validator and returns all rejections joined, for when the
// full list of problems is worth its cost.
func Each[Out any](vs ...Validator[Out]) Validator[Out] {
	vs = append([]Validator[Out](nil), vs...)
	return Func[Out](func(out Out) error {
		var errs []error
		for _, v := range vs {
			if err := v.Validate(out); err != nil {
				errs = append(errs, err)
			}
		}
		switch len(errs) {
		case 0:
			return nil
		case 1:
			return errs[0]
		}
		return &Error{Rule: "each", Reason: strconv.Itoa(len(errs)) + " rules rejected the output", Err: errors.Join(errs...)}
	})
}

// Field applies v to the part of Out that get extracts — for example the
// text of a response struct.
func Field[Out, T any](get func(Out) T, v Validator[T]) Validator[Out] {
	return Func[Out](func(out Out) error { return v.Validate(get(out)) })
}

// NonEmpty rejects an empty or all-whitespace text.
func NonEmpty() Validator[string] {
	return Func[string](func(s string) error {
		if len(bytes.TrimSpace([]byte(s))) == 0 {
			return &Error{Rule: "non_empty", Reason: "empty text"}
		}
		return nil
	})
}

// MaxLength rejects a text longer than n characters (runes).
func MaxLength(n int) Validator[string] {
	return Func[string](func(s string) error {
		if len(s) > n && utf8.RuneCountInString(s) > n {
			return &Error{Rule: "max_length", Reason: "longer than " + strconv.Itoa(n) + " characters"}
		}
		return nil
	})
}

// ValidUTF8 rejects a text that is not valid UTF-8.
func ValidUTF8() Validator[string] {
	return Func[string](func(s string) error {
		if !utf8.ValidString(s) {
			return &Error{Rule: "utf8", Reason: "invalid UTF-8"}
		}
		return nil
	})
}

// JSON rejects a text that is not one well-formed JSON value.
func JSON() Validator[string] {
	return Func[string](func(s string) error {
		if !json.Valid([]byte(s)) {
			return &Error{Rule: "json", Reason: "malformed JSON" + syntaxOffset(s)}
		}
		return nil
	})
}

// syntaxOffset locates a JSON syntax error without quoting the input (the
// encoding/json message quotes the offending character).
func syntaxOffset(s string) string {
	var v any
	err := json.Unmarshal([]byte(s), &v)
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return " at offset " + strconv.FormatInt(se.Offset, 10)
	}
	return ""
}

// Decode decodes the text as JSON into a T — strictly: unknown fields and
// trailing data are rejected, and a value of the wrong JSON type (an amount
// that arrives as a string) fails — then runs check on the result, if check
// is not nil. Use it when the answer must become a Go value anyway.
func Decode[T any](check func(T) error) Validator[string] {
	return Func[string](func(s string) error {
		_, err := DecodeValue[T](s, check)
		return err
	})
}

// DecodeValue is Decode returning the decoded value.
func DecodeValue[T any](s string, check func(T) error) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return v, decodeError(err)
	}
	if dec.More() {
		return v, &Error{Rule: "decode", Reason: "trailing data after the JSON value"}
	}
	if check != nil {
		if err := check(v); err != nil {
			var ve *Error
			if errors.As(err, &ve) {
				return v, err
			}
			return v, &Error{Rule: "decode", Reason: "field check failed", Err: err}
		}
	}
	return v, nil
}

// decodeError describes a decoding failure by position, field and type,
// never by the value found.
func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		field := te.Field
		if field == "" {
			field = "(root)"
		}
		// te.Value is the JSON kind, and for a number the number itself
		// ("number 4111111111111111"): keep the kind only.
		kind, _, _ := strings.Cut(te.Value, " ")
		return &Error{Rule: "decode", Reason: "field " + field + ": got JSON " + kind + ", want " + te.Type.String(), Err: err}
	case errors.As(err, &se):
		return &Error{Rule: "decode", Reason: "malformed JSON at offset " + strconv.FormatInt(se.Offset, 10)}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &Error{Rule: "decode", Reason: "empty or truncated JSON"}
	}
	// encoding/json reports unknown fields as `json: unknown field "name"`;
	// the name comes from the answer, so it is not repeated.
	return &Error{Rule: "decode", Reason: "JSON does not match the expected shape"}
}
