package jsonschema_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/validate"
	"github.com/tierguard/tierguard/validate/jsonschema"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const invoiceSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string"},
    "amount": {"type": "number", "exclusiveMinimum": 0}
  },
  "required": ["id", "amount"],
  "additionalProperties": false
}`

const secret = "4111111111111111"

// rejects asserts that v rejects s with rule, without quoting the answer.
func rejects(t *testing.T, v validate.Validator[string], s string) *validate.Error {
	t.Helper()
	err := v.Validate(s)
	var ve *validate.Error
	require.True(t, errors.As(err, &ve), "%v", err)
	assert.Equal(t, "json_schema", ve.Rule)
	assert.NotContains(t, err.Error(), secret)
	assert.Equal(t, classify.InvalidOutput, classify.Classify(err).Class)
	return ve
}

func TestCompile(t *testing.T) {
	v, err := jsonschema.Compile([]byte(invoiceSchema))
	require.NoError(t, err)
	assert.NoError(t, v.Validate(`{"id":"a1","amount":3}`))

	ve := rejects(t, v, `{"id":"a1","amount":"`+secret+`"}`)
	assert.Equal(t, "schema keyword /properties/amount/type failed", ve.Reason)
	ve = rejects(t, v, `{"id":"a1"}`)
	assert.Equal(t, "schema keyword /required failed", ve.Reason)
	rejects(t, v, `{"id":"a1","amount":1,"`+secret+`":2}`)
	ve = rejects(t, v, `not json `+secret)
	assert.True(t, strings.HasPrefix(ve.Reason, "malformed JSON at offset"), ve.Reason)

	_, err = jsonschema.Compile([]byte(`{"type": 5}`))
	assert.ErrorContains(t, err, "does not compile")
	_, err = jsonschema.Compile([]byte(`{`))
	assert.ErrorContains(t, err, "not valid JSON")
	_, err = jsonschema.Compile([]byte(`{"$ref": "file:///etc/passwd"}`))
	assert.Error(t, err, "external references are refused")
}

// An answer that must be JSON of a given shape: the schema is compiled
// once, and a rejection names the failing location, never the answer.
func ExampleCompile() {
	v, err := jsonschema.Compile([]byte(`{
		"type": "object",
		"required": ["sentiment", "score"],
		"properties": {
			"sentiment": {"enum": ["positive", "negative", "neutral"]},
			"score": {"type": "number", "minimum": 0, "maximum": 1}
		}
	}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Validate(`{"sentiment": "positive", "score": 0.93}`))
	fmt.Println(v.Validate(`{"sentiment": "ecstatic", "score": 0.93}`))
	fmt.Println(v.Validate(`Sure! Here is the JSON you asked for`))
	// Output:
	// <nil>
	// tierguard: invalid output (json_schema): schema keyword /properties/sentiment/enum failed
	// tierguard: invalid output (json_schema): malformed JSON at offset 1
}
