package fallback_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tierguard/tierguard/classify"
	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/validate"
)

// A custom validator's error counts as invalid output, and its text, which
// may quote the answer, stays out of the error string.
func TestAsInvalidOutput(t *testing.T) {
	const answer = "the answer's private text"
	custom := errors.New("bad " + answer)
	err := fallback.AsInvalidOutput(custom)
	assert.ErrorIs(t, err, custom)
	assert.Equal(t, classify.InvalidOutput, classify.Classify(err).Class)
	assert.NotContains(t, err.Error(), answer)
	ve := validate.Errorf("x", "y")
	assert.Same(t, error(ve), fallback.AsInvalidOutput(ve))
}
