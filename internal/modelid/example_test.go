package modelid_test

import (
	"fmt"

	"github.com/tierguard/tierguard/internal/modelid"
)

func ExampleNormalize() {
	for _, id := range []string{"Gemini-2.5-Flash ", "models/gemini-2.5-flash", "publishers/google/models/gemini-2.5-pro", "gemini-2.0-flash-001"} {
		fmt.Println(modelid.Normalize(id))
	}
	// Output:
	// gemini-2.5-flash
	// gemini-2.5-flash
	// gemini-2.5-pro
	// gemini-2.0-flash-001
}
