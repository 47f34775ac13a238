package modcheck

import (
	"bufio"
	"bytes"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const root = "github.com/tierguard/tierguard"

// production is every module the library's packages may compile in: the
// OTel API (with what it pulls in: logr for its global error handler,
// xxhash for attribute sets, the auto-instrumentation SDK hook) and the
// JSON Schema validator (with x/text).
var production = []string{
	root,
	"go.opentelemetry.io/otel",
	"go.opentelemetry.io/otel/metric",
	"go.opentelemetry.io/otel/trace",
	"go.opentelemetry.io/auto/sdk",
	"github.com/go-logr/logr",
	"github.com/go-logr/stdr",
	"github.com/cespare/xxhash/v2",
	"github.com/santhosh-tekuri/jsonschema/v6",
	"golang.org/x/text",
}

// testOnly are the direct requirements that only tests and the test bed
// (internal/testbed) use.
var testOnly = []string{
	"github.com/stretchr/testify",
	"go.uber.org/goleak",
	"go.opentelemetry.io/otel/sdk",
	"go.opentelemetry.io/otel/sdk/metric",
	// fallback/ratelimit's tests compare its buckets with x/time/rate's.
	"golang.org/x/time",
}

// goList runs the go command on the root module alone (GOWORK=off: what a
// user of the module resolves, without the workspace's nested modules).
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list"}, args...)...)
	cmd.Dir = "../../.."
	cmd.Env = append(cmd.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	require.NoError(t, err, "go list %v: %s", args, stderr.String())
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l := strings.TrimSpace(sc.Text()); l != "" {
			lines = append(lines, l)
		}
	}
	return lines
}

// The library's packages — every package of the root module but the test
// bed — compile in only the production modules.
func TestLibraryDependsOnlyOnTheOTelAPIAndJSONSchema(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	var lib []string
	for _, p := range goList(t, "./...") {
		if !strings.HasPrefix(p, root+"/internal/testbed/") {
			lib = append(lib, p)
		}
	}
	require.NotEmpty(t, lib)
	mods := goList(t, append([]string{"-deps", "-f", "{{with .Module}}{{.Path}}{{end}}"}, lib...)...)
	slices.Sort(mods)
	for _, m := range slices.Compact(mods) {
		assert.Contains(t, production, m, "a library package compiles in %s: move the code that needs it to a nested module", m)
	}
}

// Every direct requirement of the root go.mod is a production module or
// one of the known test-only ones, so a new requirement is a decision.
func TestRootRequirementsAreKnown(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	direct := goList(t, "-m", "-f", "{{if not .Indirect}}{{if not .Main}}{{.Path}}{{end}}{{end}}", "all")
	require.NotEmpty(t, direct)
	for _, m := range direct {
		if !slices.Contains(production, m) {
			assert.Contains(t, testOnly, m, "the root go.mod requires %s directly: production code may not use it, and a test-only need must be listed here", m)
		}
	}
}

// The core chain does not compile in its extensions: a service that only
// chains tiers pays for no cache, ledger, router, chaos switch or JSON
// Schema implementation, and the extensions plug in through the chain's
// public contract (observers, tiers, the context).
func TestTheCoreImportsNoExtension(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	deps := goList(t, "-deps", "./fallback")
	for _, ext := range []string{
		root + "/fallback/cache", root + "/fallback/spend", root + "/fallback/route", root + "/fallback/chaos",
		root + "/validate/jsonschema", "github.com/santhosh-tekuri/jsonschema/v6",
	} {
		assert.NotContains(t, deps, ext, "package fallback compiles in %s", ext)
	}
}
