package validate_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/validate"
)

type bounded struct {
	Amount int8   `json:"amount"`
	Count  uint   `json:"count"`
	Ratio  uint16 `json:"ratio"`
}

// TestDecodeErrorNeverQuotesANumber: a number of the wrong type or range
// (a card number where an int8 was expected) is reported by its JSON kind
// only. encoding/json's UnmarshalTypeError.Value is "number 4111111111111111";
// the rejection used to repeat it, and otelx exports the reason as
// validation_reason.
func TestDecodeErrorNeverQuotesANumber(t *testing.T) {
	for _, out := range []string{`{"amount": 4111111111111111}`, `{"count": -4111111111111111}`, `{"ratio": 4111.5}`, `{"amount": 41e111}`} {
		ve := rejects(t, validate.Decode[bounded](nil), out, "decode")
		assert.NotContains(t, ve.Error(), "4111", out)
		assert.NotContains(t, ve.Error(), "41e111", out)
		assert.Contains(t, ve.Reason, "got JSON number, want", out)
	}
}

// TestZeroValueAnswerIsRejected: a tier that returns "" with a nil error
// is caught by NonEmpty (and a struct's zero value by Decode's check).
func TestZeroValueAnswerIsRejected(t *testing.T) {
	rejects(t, validate.NonEmpty(), "", "non_empty")
	rejects(t, validate.NonEmpty(), " \n\t ", "non_empty")
	rejects(t, validate.Decode[invoice](nil), "", "decode")
	rejects(t, validate.JSON(), "", "json")
	notZero := validate.Decode(func(i invoice) error {
		if i == (invoice{}) {
			return validate.Errorf("decode", "zero value")
		}
		return nil
	})
	rejects(t, notZero, `{}`, "decode")
}
