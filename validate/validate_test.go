package validate_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/validate"
)

const secret = "SECRET-4242"

// rejects asserts that v rejects out with rule, classifies as
// InvalidOutput and does not repeat the secret.
func rejects(t *testing.T, v validate.Validator[string], out, rule string) *validate.Error {
	t.Helper()
	err := v.Validate(out)
	require.Error(t, err, "%q", out)
	var ve *validate.Error
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, rule, ve.Rule)
	assert.Equal(t, classify.InvalidOutput, classify.Classify(err).Class)
	assert.NotContains(t, err.Error(), secret)
	assert.NotContains(t, classify.Classify(err).String(), secret)
	return ve
}

func TestText(t *testing.T) {
	assert.NoError(t, validate.NonEmpty().Validate("hello"))
	rejects(t, validate.NonEmpty(), " \n\t", "non_empty")
	rejects(t, validate.NonEmpty(), "", "non_empty")

	assert.NoError(t, validate.MaxLength(3).Validate("日本語"), "runes, not bytes")
	rejects(t, validate.MaxLength(3), secret, "max_length")

	assert.NoError(t, validate.ValidUTF8().Validate("ok"))
	rejects(t, validate.ValidUTF8(), secret+"\xff", "utf8")
}

func TestJSON(t *testing.T) {
	assert.NoError(t, validate.JSON().Validate(`{"a":1}`))
	ve := rejects(t, validate.JSON(), `{"amount": `+secret+`}`, "json")
	assert.Contains(t, ve.Reason, "offset")
	rejects(t, validate.JSON(), "", "json")
	rejects(t, validate.JSON(), `{"a":1} {"b":2}`, "json")
}

type invoice struct {
	ID     string  `json:"id"`
	Amount float64 `json:"amount"`
}

func TestDecode(t *testing.T) {
	positive := func(in invoice) error {
		if in.Amount <= 0 {
			return validate.Errorf("decode", "amount must be positive")
		}
		return nil
	}
	v := validate.Decode(positive)
	assert.NoError(t, v.Validate(`{"id":"a1","amount":12.5}`))

	ve := rejects(t, v, `{"id":"a1","amount":"`+secret+`"}`, "decode")
	assert.Equal(t, "field amount: got JSON string, want float64", ve.Reason, "an amount that arrives as a string must fail")
	ve = rejects(t, v, `{"id":"a1","amount":-1}`, "decode")
	assert.Equal(t, "amount must be positive", ve.Reason)
	rejects(t, v, `{"id":"a1","amount":1,"`+secret+`":1}`, "decode")
	rejects(t, v, `{"id":"a1","amount":1} trailing`, "decode")
	rejects(t, v, `{"id":"a1",`, "decode")
	rejects(t, v, ``, "decode")
	rejects(t, v, `[`+secret+`]`, "decode")

	plain := validate.Decode(func(invoice) error { return errors.New("custom " + secret) })
	ve = rejects(t, plain, `{"id":"a","amount":1}`, "decode")
	assert.Equal(t, "field check failed", ve.Reason)

	got, err := validate.DecodeValue[invoice](`{"id":"x","amount":2}`, nil)
	require.NoError(t, err)
	assert.Equal(t, invoice{ID: "x", Amount: 2}, got)
}

const invoiceSchema = `{
  "type": "object",
  "properties": {
    "id": {"type": "string", "minLength": 1},
    "amount": {"type": "number", "exclusiveMinimum": 0}
  },
  "required": ["id", "amount"],
  "additionalProperties": false
}`

func TestCompose(t *testing.T) {
	var order []string
	mark := func(name string, fail bool) validate.Validator[string] {
		return validate.Func[string](func(string) error {
			order = append(order, name)
			if fail {
				return validate.Errorf(name, "failed")
			}
			return nil
		})
	}
	err := validate.All(mark("a", false), mark("b", true), mark("c", true)).Validate("x")
	assert.EqualError(t, err, "tierguard: invalid output (b): failed")
	assert.Equal(t, []string{"a", "b"}, order, "All stops at the first rejection")

	order = nil
	err = validate.Each(mark("a", true), mark("b", false), mark("c", true)).Validate("x")
	var ve *validate.Error
	require.ErrorAs(t, err, &ve)
	assert.Equal(t, "2 rules rejected the output", ve.Reason)
	assert.Equal(t, []string{"a", "b", "c"}, order)
	assert.NoError(t, validate.Each[string]().Validate("x"))

	type response struct{ Text string }
	field := validate.Field(func(r response) string { return r.Text }, validate.NonEmpty())
	assert.NoError(t, field.Validate(response{Text: "hi"}))
	assert.Error(t, field.Validate(response{}))
}

func TestHugeInputsAreHandled(t *testing.T) {
	big := `{"id":"` + strings.Repeat("a", 10<<20) + `","amount":1}`
	assert.NoError(t, validate.JSON().Validate(big))
	assert.NoError(t, validate.Decode[invoice](nil).Validate(big))
	deep := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	rejects(t, validate.JSON(), deep, "json")
}
