package validate_test

import (
	"fmt"

	"github.com/tierguard/tierguard/validate"
)

func Example() {
	type Invoice struct {
		ID     string  `json:"id"`
		Amount float64 `json:"amount"`
	}
	v := validate.All(
		validate.NonEmpty(),
		validate.Decode(func(in Invoice) error {
			if in.Amount <= 0 {
				return validate.Errorf("decode", "amount must be positive")
			}
			return nil
		}),
	)
	fmt.Println(v.Validate(`{"id":"inv-1","amount":120.5}`))
	fmt.Println(v.Validate(`{"id":"inv-1","amount":"120.5"}`))
	// Output:
	// <nil>
	// tierguard: invalid output (decode): field amount: got JSON string, want float64
}

// An answer that must be JSON of a given shape: the schema is compiled
// once, and a rejection names the failing location, never the answer.
func ExampleJSONSchema() {
	v, err := validate.JSONSchema([]byte(`{
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
