package snippets

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestREADMESnippetsCompile type-checks (go vet: the compiler's checks
// without code generation, then vet's) every ```go block of every README
// file of the repository, as written today.
func TestREADMESnippetsCompile(t *testing.T) {
	root := repoRoot(t)
	readmes := findREADMEs(t, root)
	require.Contains(t, readmes, "README.md")

	var all []snippet
	for _, r := range readmes {
		data, err := os.ReadFile(filepath.Join(root, r))
		require.NoError(t, err)
		all = append(all, extract(r, data)...)
	}
	var compiled, marked []snippet
	for _, s := range all {
		if s.NoCompile != "" {
			marked = append(marked, s)
		} else {
			compiled = append(compiled, s)
		}
	}
	for _, s := range marked {
		t.Logf("not compiled, marked: %s:%d (%s)", s.File, s.Line, s.NoCompile)
	}
	t.Logf("%d Go snippets in %d README files: %d compiled, %d marked not to compile", len(all), len(readmes), len(compiled), len(marked))
	require.NotEmpty(t, compiled)

	failures := check(t, root, compiled)
	for _, f := range failures {
		t.Errorf("snippet %s:%d does not compile:\n%s", f.Snippet.File, f.Snippet.Line, f.Output)
	}
}

// TestABrokenSnippetIsCaught feeds the checker a README with one snippet
// that compiles, one that does not, and one marked not to: only the
// broken one fails, and its error names the README's line.
func TestABrokenSnippetIsCaught(t *testing.T) {
	root := repoRoot(t)
	readme := strings.Join([]string{
		"# A module",
		"",
		"```go",
		"func echo(_ context.Context, q string) (string, error) { return q, nil }",
		"",
		"ctx := context.Background()",
		"chain, err := fallback.New(fallback.Config[string, string]{",
		"\tStages: []fallback.Stage[string, string]{{Tier: fallback.Tier(\"echo\", echo)}},",
		"})",
		"res, err := chain.Do(ctx, \"hi\")",
		"```",
		"",
		"```go",
		"ledger, err := spend.New(spend.Config{})",
		"ledger.RecordEmbedding(context.Background(), nil) // no such method",
		"```",
		"",
		"<!-- snippet: no-compile (pseudo-code) -->",
		"```go",
		"for each tier { try it }",
		"```",
	}, "\n")
	snips := extract("testdata/broken/README.md", []byte(readme))
	require.Len(t, snips, 3)
	assert.Equal(t, 4, snips[0].Line)
	assert.Equal(t, 14, snips[1].Line)
	assert.Equal(t, "pseudo-code", snips[2].NoCompile)

	failures := check(t, root, snips[:2])
	require.Len(t, failures, 1)
	assert.Equal(t, 14, failures[0].Snippet.Line)
	assert.Contains(t, failures[0].Output, "testdata/broken/README.md:15:")
	assert.Contains(t, failures[0].Output, "RecordEmbedding")
}

// snippet is one ```go block of a README.
type snippet struct {
	File      string // README path relative to the repository root
	Line      int    // README line of the block's first line of code
	Code      string
	NoCompile string // the reason given by its no-compile mark, if any
	Standins  string // the stand-ins file its mark names, if any
}

// failure is a snippet that did not build or vet, with the go command's
// output, positions rewritten to the README's lines.
type failure struct {
	Snippet snippet
	Output  string
}

var (
	noCompileMark = regexp.MustCompile(`^<!--\s*snippet:\s*no-compile\s*(?:\((.*)\))?\s*-->$`)
	standinsMark  = regexp.MustCompile(`^<!--\s*snippet:\s*standins\s+([A-Za-z0-9_.-]+)\s*-->$`)
)

// extract returns the ```go blocks of a README.
func extract(file string, data []byte) []snippet {
	lines := strings.Split(string(data), "\n")
	var out []snippet
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		s := snippet{File: file, Line: i + 2}
		for j := i - 1; j >= 0; j-- {
			prev := strings.TrimSpace(lines[j])
			if prev == "" {
				continue
			}
			if m := noCompileMark.FindStringSubmatch(prev); m != nil {
				s.NoCompile = m[1]
				if s.NoCompile == "" {
					s.NoCompile = "no reason given"
				}
			}
			if m := standinsMark.FindStringSubmatch(prev); m != nil {
				s.Standins = m[1]
			}
			break
		}
		var code []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			code = append(code, lines[i])
		}
		s.Code = strings.Join(code, "\n")
		out = append(out, s)
	}
	return out
}

// repoRoot is the directory of go.work above the test's directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	require.NoError(t, err)
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		require.NotEqual(t, parent, dir, "no go.work above the test")
		dir = parent
	}
}

// findREADMEs lists README.md files of the repository: the root's and each
// module's (test data left out).
func findREADMEs(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() && p != root && (strings.HasPrefix(name, ".") || name == "testdata" || strings.HasPrefix(name, genPrefix)) {
			return filepath.SkipDir
		}
		if !d.IsDir() && name == "README.md" {
			rel, err := filepath.Rel(root, p)
			if err != nil {
				return err
			}
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	require.NoError(t, err)
	sort.Strings(out)
	return out
}

// genPrefix names the directories the test builds its packages in, inside
// this module (so that go.work's modules resolve); .gitignore lists them.
const genPrefix = "gen-"

// check type-checks and vets the snippets, one package each, and returns
// the ones that fail.
func check(t *testing.T, root string, snips []snippet) []failure {
	t.Helper()
	here, err := os.Getwd()
	require.NoError(t, err)
	gen, err := os.MkdirTemp(here, genPrefix)
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(gen) })

	pkgs := make([]*genPkg, len(snips))
	for i, s := range snips {
		standins, imports := readStandins(t, s)
		p := &genPkg{snip: s, dir: filepath.Join(gen, fmt.Sprintf("s%03d", i)), standins: standins, names: imports}
		p.build()
		require.NoError(t, os.MkdirAll(p.dir, 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p.dir, "standins.go"), standins, 0o644))
		pkgs[i] = p
	}
	// go vet type-checks every package as the compiler does (and then
	// runs its analyzers) without generating code, which for 20 packages
	// instantiating the chain's generics would take half a minute. Use
	// what a snippet declared and left unused, drop imports it does not
	// need, and vet again (vet names one type error per package at a time).
	var out map[string]string
	for round := 0; round < 12; round++ {
		for _, p := range pkgs {
			require.NoError(t, os.WriteFile(filepath.Join(p.dir, "snippet.go"), p.source(), 0o644))
		}
		out = goCmd(t, gen, "vet", "./...")
		fixed := false
		for _, p := range pkgs {
			if p.fixUnused(out[p.rel(gen)]) {
				fixed = true
			}
		}
		if !fixed {
			break
		}
	}
	if os.Getenv("SNIPPETS_BUILD") != "" {
		// The compiler too (half a minute more): what vet accepted, built.
		built := goCmd(t, gen, "build", "./...")
		for dir, msg := range built {
			if out[dir] == "" {
				out[dir] = msg
			}
		}
	}
	var failures []failure
	for _, p := range pkgs {
		if msg := out[p.rel(gen)]; msg != "" {
			failures = append(failures, failure{Snippet: p.snip, Output: p.toREADME(msg)})
		}
	}
	return failures
}

// goCmd runs the go command over the generated packages and returns its
// messages per package directory (relative to gen).
func goCmd(t *testing.T, gen string, args ...string) map[string]string {
	t.Helper()
	start := time.Now()
	cmd := exec.Command("go", args...)
	cmd.Dir = gen
	outb, _ := cmd.CombinedOutput()
	t.Logf("go %s: %.1fs", strings.Join(args, " "), time.Since(start).Seconds())
	// Messages come under a "# <package>" line (vet's "# [<package>]" or
	// "# <package>\n# [<package>]"); the positions in them are the
	// README's, through the line directives.
	msgs := map[string]string{}
	current := ""
	for _, line := range strings.Split(string(outb), "\n") {
		if m := pkgHeader.FindStringSubmatch(line); m != nil {
			current = m[1]
			continue
		}
		if current != "" && strings.TrimSpace(line) != "" {
			msgs[current] += line + "\n"
		}
	}
	if cmd.ProcessState != nil && !cmd.ProcessState.Success() && len(msgs) == 0 {
		t.Fatalf("go %s failed with no message about a snippet:\n%s", strings.Join(args, " "), outb)
	}
	return msgs
}

var pkgHeader = regexp.MustCompile(`^# \[?\S*/` + genPrefix + `[^/]+/(s[0-9]{3})\]?$`)

// genPkg is the package made of one snippet.
type genPkg struct {
	snip     snippet
	dir      string
	standins []byte
	names    map[string]string // package name → import path

	imports []string // import specs, `name "path"`
	decls   []string
	body    []string
	lineOf  []int
	unused  []string
	dropped map[string]bool
}

func (p *genPkg) rel(gen string) string { r, _ := filepath.Rel(gen, p.dir); return r }

var selector = regexp.MustCompile(`\b([a-z][a-z0-9]*)\.[A-Za-z_]`)

// build splits the snippet into imports, top-level declarations and body.
func (p *genPkg) build() {
	lines := strings.Split(p.snip.Code, "\n")
	p.dropped = map[string]bool{}
	seen := map[string]bool{}
	addImport := func(spec string) {
		if !seen[spec] {
			seen[spec] = true
			p.imports = append(p.imports, spec)
		}
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		readmeLine := p.snip.Line + i
		switch {
		case strings.HasPrefix(line, "import ("):
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != ")"; i++ {
				if spec := strings.TrimSpace(lines[i]); spec != "" && !strings.HasPrefix(spec, "//") {
					addImport(spec)
				}
			}
		case strings.HasPrefix(line, "import "):
			addImport(strings.TrimSpace(strings.TrimPrefix(line, "import ")))
		case strings.HasPrefix(line, "type ") || strings.HasPrefix(line, "func "):
			// A top-level declaration: up to the line its braces close on.
			depth := 0
			for ; i < len(lines); i++ {
				p.decls = append(p.decls, fmt.Sprintf("//line %s:%d\n%s", p.snip.File, p.snip.Line+i, lines[i]))
				depth += strings.Count(lines[i], "{") - strings.Count(lines[i], "}")
				depth += strings.Count(lines[i], "(") - strings.Count(lines[i], ")")
				if depth <= 0 {
					break
				}
			}
		default:
			p.body = append(p.body, line)
			p.lineOf = append(p.lineOf, readmeLine)
		}
	}
	// The packages the snippet names and does not import itself.
	declared := map[string]bool{}
	for _, spec := range p.imports {
		declared[importName(spec)] = true
	}
	for _, m := range selector.FindAllStringSubmatch(p.snip.Code, -1) {
		name := m[1]
		if path, ok := p.names[name]; ok && !declared[name] {
			declared[name] = true
			if filepath.Base(path) == name || strings.HasSuffix(path, "/v9") && name == "redis" || strings.HasSuffix(path, "/v3") && name == "openai" {
				addImport(strconv.Quote(path))
			} else {
				addImport(name + " " + strconv.Quote(path))
			}
		}
	}
}

// importName is the name an import spec binds.
func importName(spec string) string {
	if name, path, ok := strings.Cut(spec, " "); ok && strings.HasPrefix(strings.TrimSpace(path), `"`) {
		return name
	}
	path, _ := strconv.Unquote(spec)
	base := filepath.Base(path)
	if regexp.MustCompile(`^v[0-9]+$`).MatchString(base) {
		base = filepath.Base(filepath.Dir(path))
		base = strings.TrimSuffix(base, "-go")
	}
	return base
}

// source is the package's snippet file: line directives map every line
// back to the README.
func (p *genPkg) source() []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "// Code generated from %s:%d by the snippets test; DO NOT EDIT.\n\npackage snippet\n\n", p.snip.File, p.snip.Line)
	if len(p.imports) > 0 {
		b.WriteString("import (\n")
		for _, spec := range p.imports {
			if !p.dropped[spec] {
				fmt.Fprintf(&b, "\t%s\n", spec)
			}
		}
		b.WriteString(")\n\n")
	}
	for _, d := range p.decls {
		b.WriteString(d + "\n")
	}
	b.WriteString("\nfunc snippet() error {\n")
	for i, line := range p.body {
		fmt.Fprintf(&b, "//line %s:%d\n%s\n", p.snip.File, p.lineOf[i], line)
	}
	b.WriteString("//line generated:1\n")
	for _, u := range p.unused {
		fmt.Fprintf(&b, "\t_ = %s\n", u)
	}
	b.WriteString("\treturn nil\n}\n")
	return b.Bytes()
}

var (
	unusedVar    = regexp.MustCompile(`declared and not used: (\w+)`)
	unusedImport = regexp.MustCompile(`"([^"]+)" (?:imported and not used|imported as (\w+) and not used)`)
)

// fixUnused takes in the compiler's complaints about unused variables and
// imports, and reports whether it changed anything.
func (p *genPkg) fixUnused(msg string) bool {
	changed := false
	for _, m := range unusedVar.FindAllStringSubmatch(msg, -1) {
		if !contains(p.unused, m[1]) {
			p.unused = append(p.unused, m[1])
			changed = true
		}
	}
	for _, m := range unusedImport.FindAllStringSubmatch(msg, -1) {
		for _, spec := range p.imports {
			if strings.HasSuffix(spec, strconv.Quote(m[1])) && !p.dropped[spec] {
				p.dropped[spec] = true
				changed = true
			}
		}
	}
	return changed
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// toREADME turns the go command's positions into README positions: the
// line directives already name the README and its line; only the
// directory prefix is left to drop.
func (p *genPkg) toREADME(msg string) string {
	var out []string
	for _, line := range strings.Split(strings.TrimRight(msg, "\n"), "\n") {
		if i := strings.Index(line, p.snip.File+":"); i >= 0 {
			line = line[i:]
		}
		out = append(out, "\t"+line)
	}
	return strings.Join(out, "\n")
}

// defaultImports are the package names a snippet may use without
// importing them.
var defaultImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "http": "net/http", "io": "io",
	"iter": "iter", "json": "encoding/json", "log": "log", "os": "os", "slog": "log/slog",
	"sql": "database/sql", "strings": "strings", "sync": "sync", "time": "time",

	"breaker":    "github.com/tierguard/tierguard/breaker",
	"catalog":    "github.com/tierguard/tierguard/fallback/catalog",
	"pool":       "github.com/tierguard/tierguard/fallback/pool",
	"bulkhead":   "github.com/tierguard/tierguard/bulkhead",
	"cache":      "github.com/tierguard/tierguard/fallback/cache",
	"chaos":      "github.com/tierguard/tierguard/fallback/chaos",
	"classify":   "github.com/tierguard/tierguard/classify",
	"deadline":   "github.com/tierguard/tierguard/deadline",
	"fallback":   "github.com/tierguard/tierguard/fallback",
	"hnsw":       "github.com/tierguard/tierguard/fallback/cache/hnsw",
	"jsonschema": "github.com/tierguard/tierguard/validate/jsonschema",
	"otelx":      "github.com/tierguard/tierguard/otelx",
	"ratelimit":  "github.com/tierguard/tierguard/fallback/ratelimit",
	"retry":      "github.com/tierguard/tierguard/retry",
	"route":      "github.com/tierguard/tierguard/fallback/route",
	"spend":      "github.com/tierguard/tierguard/fallback/spend",
	"validate":   "github.com/tierguard/tierguard/validate",

	"anthropic":  "github.com/tierguard/tierguard/fallback/anthropic",
	"gemini":     "github.com/tierguard/tierguard/fallback/gemini",
	"oaicompat":  "github.com/tierguard/tierguard/fallback/oaicompat",
	"redisstore": "github.com/tierguard/tierguard/breaker/redisstore",
	"redislimit": "github.com/tierguard/tierguard/fallback/ratelimit/redislimit",
	"redisspend": "github.com/tierguard/tierguard/fallback/spend/redisspend",
	"riverjob":   "github.com/tierguard/tierguard/fallback/riverjob",

	"genai":        "google.golang.org/genai",
	"openai":       "github.com/openai/openai-go/v3",
	"option":       "github.com/openai/openai-go/v3/option",
	"redis":        "github.com/redis/go-redis/v9",
	"river":        "github.com/riverqueue/river",
	"riversqlite":  "github.com/riverqueue/river/riverdriver/riversqlite",
	"riverpgxv5":   "github.com/riverqueue/river/riverdriver/riverpgxv5",
	"rivermigrate": "github.com/riverqueue/river/rivermigrate",
	"pgxpool":      "github.com/jackc/pgx/v5/pgxpool",
	"sdkmetric":    "go.opentelemetry.io/otel/sdk/metric",
	"sdktrace":     "go.opentelemetry.io/otel/sdk/trace",
}

var importDirective = regexp.MustCompile(`(?m)^//snippets:import (\w+) (\S+)$`)

// readStandins returns the stand-ins file of a snippet and the package
// names it may use: the defaults, with the file's //snippets:import lines
// over them. The file is testdata/standins/NAME.go for a snippet marked
// <!-- snippet: standins NAME -->, else its README's: the README's path
// with slashes as underscores and .go for .md (README.go for the root's).
// A README without one has none.
func readStandins(t *testing.T, s snippet) ([]byte, map[string]string) {
	t.Helper()
	name := strings.ReplaceAll(strings.TrimSuffix(s.File, ".md"), "/", "_") + ".go"
	if s.Standins != "" {
		name = s.Standins + ".go"
	}
	data, err := os.ReadFile(filepath.Join("testdata", "standins", name))
	switch {
	case os.IsNotExist(err) && s.Standins == "":
		data = []byte("package snippet\n")
	default:
		require.NoError(t, err, "the stand-ins of %s:%d", s.File, s.Line)
	}
	names := make(map[string]string, len(defaultImports))
	for k, v := range defaultImports {
		names[k] = v
	}
	for _, m := range importDirective.FindAllStringSubmatch(string(data), -1) {
		names[m[1]] = m[2]
	}
	return data, names
}
