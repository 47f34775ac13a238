package modelid_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/internal/modelid"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestNormalize(t *testing.T) {
	for in, want := range map[string]string{
		"gemini-2.5-flash":         "gemini-2.5-flash",
		"":                         "",
		"Gemini-2.5-Flash":         "gemini-2.5-flash",
		"GEMINI-2.5-FLASH":         "gemini-2.5-flash",
		"gemini-2.5-flash ":        "gemini-2.5-flash",
		"\tgemini-2.5-flash\n":     "gemini-2.5-flash",
		"  ":                       "",
		"models/gemini-2.5-flash":  "gemini-2.5-flash",
		"Models/Gemini-2.5-Flash ": "gemini-2.5-flash",
		"publishers/google/models/gemini-2.5-pro":                                  "gemini-2.5-pro",
		"projects/p/locations/us-central1/publishers/google/models/gemini-2.5-pro": "gemini-2.5-pro",
		" models/ gemini-2.5-pro":                                                  "gemini-2.5-pro",
		"models/":                                                                  "",
		// A tuned model is a model of its own.
		"tunedModels/my-model-42": "tunedmodels/my-model-42",
		// Versions are priced apart: never cut.
		"gemini-2.0-flash-001":           "gemini-2.0-flash-001",
		"claude-sonnet-4@20250514":       "claude-sonnet-4@20250514",
		"gemini-2.5-flash-preview-05-20": "gemini-2.5-flash-preview-05-20",
		// Vendor prefixes of gateways name other models: kept.
		"openai/gpt-4o": "openai/gpt-4o",
		// A price table's prefix keeps its star.
		"Gemini-2.5-Flash-*": "gemini-2.5-flash-*",
		"ÉCLAIR-1":           "éclair-1",
	} {
		assert.Equal(t, want, modelid.Normalize(in), "%q", in)
		assert.Equal(t, want, modelid.Normalize(want), "idempotent on %q", want)
	}
}

// An id already normal costs no allocation: Normalize sits on the
// ledger's path.
func TestNormalizeNormalAllocatesNothing(t *testing.T) {
	id := "gemini-2.5-flash-lite"
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		if modelid.Normalize(id) != id {
			t.Fatal("changed")
		}
	}))
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{"gemini-2.5-pro", " Models/X ", "publishers/google/models/y", "tunedModels/z", "a/models/ b", "\u00a0models/\u00a0x", " models/ models/x", "İ"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		n := modelid.Normalize(id)
		assert.Equal(t, n, modelid.Normalize(n), "idempotent")
		assert.LessOrEqual(t, len(n), len(id)*3+3)
	})
}
