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
