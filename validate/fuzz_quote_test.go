package validate_test

import (
	"strings"
	"testing"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/validate"
	"github.com/tierguard/tierguard/validate/jsonschema"
)

// FuzzValidatorsNeverQuoteTheAnswer puts arbitrary text, marked, in every
// place of an answer (a value, a key, a number, trailing data, the whole
// answer) and runs every built-in validator: no rejection, and no verdict,
// may repeat any of it.
func FuzzValidatorsNeverQuoteTheAnswer(f *testing.F) {
	for _, s := range []string{"", "4111111111111111", "abc", "\xff", `"}`, "1e308", "-0", "SECRET"} {
		f.Add(s)
	}
	schema, err := jsonschema.Compile([]byte(invoiceSchema))
	if err != nil {
		f.Fatal(err)
	}
	vs := []validate.Validator[string]{
		validate.NonEmpty(), validate.MaxLength(16), validate.ValidUTF8(), validate.JSON(), schema,
		validate.Decode[invoice](nil), validate.Decode[bounded](nil), validate.Decode[map[string]int](nil),
		validate.Decode[[]bounded](nil), validate.Decode[map[string]bounded](nil),
	}
	f.Fuzz(func(t *testing.T, s string) {
		// Keep the text's letters and digits, between markers no validator
		// would ever say by itself.
		var b strings.Builder
		for _, r := range s {
			if r < 128 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
				b.WriteRune(r)
			}
		}
		word := "Zq" + b.String() + "qZ"
		digits := "987654321"
		for _, r := range s {
			if r >= '0' && r <= '9' {
				digits += string(r)
			}
		}
		outs := []string{
			word,
			`{"id":"` + word + `","amount":1}`,
			`{"` + word + `":1}`,
			`{"id":"a","amount":1,"` + word + `":2}`,
			`{"amount":"` + word + `"}`,
			`{"amount":` + digits + `}`,
			`{"count":-` + digits + `}`,
			`{"ratio":` + digits + `.5}`,
			`{"` + word + `":{"amount":` + digits + `}}`,
			`[{"amount":` + digits + `}]`,
			`{"id":"a","amount":1}` + word,
			`[` + word + `]`,
			"\xff" + word,
			strings.Repeat(word, 3),
		}
		for _, out := range outs {
			for _, v := range vs {
				err := v.Validate(out)
				if err == nil {
					continue
				}
				for _, text := range []string{err.Error(), classify.Classify(err).String()} {
					if strings.Contains(text, "Zq") || strings.Contains(text, "qZ") || strings.Contains(text, digits) {
						t.Fatalf("rejection of %q repeats it: %q", out, text)
					}
				}
			}
		}
	})
}
