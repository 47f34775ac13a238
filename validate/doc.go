// Package validate checks a model's answer before it counts as a success.
//
// A 200 is not an answer: invoices arrive as well-formed
// responses with an amount in a string. A Validator rejects such an output;
// the fallback chain then moves to the next tier, and the rejection does not
// count against the tier's circuit breaker (the transport was healthy).
//
// Built-ins cover text and JSON answers: NonEmpty, MaxLength, ValidUTF8,
// JSON (well-formed), and Decode (a strict typed decode with field
// checks); a JSON Schema is checked by package validate/jsonschema, kept
// apart so that a chain without one compiles no schema implementation in.
// Compose
// them with All (first rejection) or Each (every rejection), and apply a
// text validator to a field of a richer output with Field.
//
// Rejections are *Error values classified as classify.InvalidOutput. Their
// text names the rule and where the answer failed — an offset, a field, a
// schema keyword — and never quotes the answer, so they are safe to log.
package validate
