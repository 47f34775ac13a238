package validate_test

import (
	"errors"
	"testing"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/validate"
	"github.com/tierguard/tierguard/validate/jsonschema"
)

// FuzzValidators runs every built-in validator on arbitrary bytes: no panic,
// and every rejection is an *Error classified as InvalidOutput.
func FuzzValidators(f *testing.F) {
	for _, s := range []string{`{"id":"a","amount":1}`, `{"amount":"1"}`, "", "\xff", "[[[", `{"id":"a","amount":1} x`} {
		f.Add(s)
	}
	schema, err := jsonschema.Compile([]byte(invoiceSchema))
	if err != nil {
		f.Fatal(err)
	}
	vs := []validate.Validator[string]{
		validate.NonEmpty(), validate.MaxLength(16), validate.ValidUTF8(), validate.JSON(),
		validate.Decode[invoice](nil), schema,
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, v := range vs {
			err := v.Validate(s)
			if err == nil {
				continue
			}
			var ve *validate.Error
			if !errors.As(err, &ve) {
				t.Fatalf("rejection is not a *validate.Error: %v", err)
			}
			if classify.Classify(err).Class != classify.InvalidOutput {
				t.Fatalf("rejection does not classify as InvalidOutput: %v", err)
			}
		}
	})
}
