package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// writeTree makes a checkout of files (path → content) in a temporary
// directory.
func writeTree(t *testing.T, files map[string]string) (string, []string) {
	t.Helper()
	root := t.TempDir()
	var list []string
	for p, content := range files {
		require.NoError(t, os.MkdirAll(filepath.Join(root, filepath.Dir(p)), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(root, p), []byte(content), 0o644))
		list = append(list, p)
	}
	return root, list
}

func TestModulesAtTheirPinnedVersions(t *testing.T) {
	root, files := writeTree(t, map[string]string{
		"go.mod":                    "module github.com/tierguard/tierguard\n",
		"go.work":                   "replace (\n\tgithub.com/tierguard/tierguard/fallback/gemini v0.3.0 => ./fallback/gemini\n)\n",
		"fallback/gemini/go.mod":    "module github.com/tierguard/tierguard/fallback/gemini\n\nrequire github.com/tierguard/tierguard v0.3.0\n",
		"breaker/redisstore/go.mod": "module github.com/tierguard/tierguard/breaker/redisstore\n\nrequire (\n\tgithub.com/tierguard/tierguard v0.3.0\n)\n",
		"examples/go.mod":           "module github.com/tierguard/tierguard/examples\n\nrequire github.com/tierguard/tierguard/fallback/gemini v0.3.0\n",
		"internal/testbed/x/go.mod": "module github.com/tierguard/tierguard/internal/testbed/x\n",
	})
	mods, dirs, err := modules(root, files)
	require.NoError(t, err)
	assert.Equal(t, []module{
		{Path: "github.com/tierguard/tierguard", Dir: ".", Version: "v0.3.0"},
		{Path: "github.com/tierguard/tierguard/breaker/redisstore", Dir: "breaker/redisstore", Version: "v0.3.0"},
		{Path: "github.com/tierguard/tierguard/fallback/gemini", Dir: "fallback/gemini", Version: "v0.3.0"},
	}, mods, "examples and the test bed are not released; an unpinned module takes the root's version")
	assert.ElementsMatch(t, []string{".", "fallback/gemini", "breaker/redisstore", "examples", "internal/testbed/x"}, dirs)
}

func TestPinsThatDisagreeFail(t *testing.T) {
	root, files := writeTree(t, map[string]string{
		"go.mod":                 "module github.com/tierguard/tierguard\n",
		"go.work":                "replace github.com/tierguard/tierguard v0.1.0 => ./\n",
		"fallback/gemini/go.mod": "module github.com/tierguard/tierguard/fallback/gemini\n\nrequire github.com/tierguard/tierguard v0.2.0\n",
	})
	_, _, err := modules(root, files)
	assert.ErrorContains(t, err, "pins github.com/tierguard/tierguard at")
}

func TestAModuleZipLeavesOutNestedModules(t *testing.T) {
	dirs := []string{".", "fallback/gemini", "examples"}
	rel, ok := inModule("fallback/doc.go", ".", dirs)
	assert.True(t, ok)
	assert.Equal(t, "fallback/doc.go", rel)
	_, ok = inModule("fallback/gemini/tier.go", ".", dirs)
	assert.False(t, ok, "the nested module's file is not the root's")
	_, ok = inModule("examples/outage/main.go", ".", dirs)
	assert.False(t, ok, "an unreleased module is no part of the root either")
	rel, ok = inModule("fallback/gemini/tier.go", "fallback/gemini", dirs)
	assert.True(t, ok)
	assert.Equal(t, "tier.go", rel)
	_, ok = inModule("fallback/doc.go", "fallback/gemini", dirs)
	assert.False(t, ok)
}

func TestTheConsumerImportsEveryModule(t *testing.T) {
	assert.NoError(t, importsEvery([]module{{Path: "github.com/tierguard/tierguard/fallback/riverjob"}}))
	assert.ErrorContains(t, importsEvery([]module{{Path: "github.com/tierguard/tierguard/fallback/newthing"}}), "does not import github.com/tierguard/tierguard/fallback/newthing")
}

func TestEscape(t *testing.T) {
	assert.Equal(t, "github.com/!burnt!sushi/toml", escape("github.com/BurntSushi/toml"))
}
