// Package jsonschema validates a model's JSON answer against a JSON Schema
// (drafts 4 to 2020-12), compiled once with
// github.com/santhosh-tekuri/jsonschema/v6: a complete, maintained
// implementation, which a hand-written subset would not be.
//
// It lives apart from package validate so that a chain that never checks
// a schema does not compile a schema implementation in: import it where a
// schema is needed, and use its validator like any validate.Validator.
//
// Rejections are *validate.Error values of rule "json_schema", classified
// as classify.InvalidOutput; their text names the schema keyword that
// failed or the offset of a syntax error, never the answer.
package jsonschema
