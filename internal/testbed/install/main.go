// Command install checks that tierguard installs as a newcomer installs it:
// with go get from a module proxy, outside the checkout, without go.work.
//
// It builds a file-based module proxy (the layout of `go help goproxy`: a
// list, and a .info, .mod and .zip per version) from the checkout's tracked
// files, one entry per released module — the root and every nested module
// except examples and the test bed — at the version the go.mod files and
// go.work pin it at (v0.1.0 today). Then, in a fresh module in a temporary
// directory, with GOWORK=off, GOFLAGS=-mod=mod and
// GOPROXY=file://<proxy>,file://<your module cache>,<your GOPROXY>, it
// runs go get for every module and builds and runs
// testdata/consumer/main.go, which imports each module and calls it once.
// tierguard comes from the file proxy alone (GONOSUMDB keeps the checksum
// database out of it); other modules come from your module cache when it
// has them, else from your proxy.
//
//	go run ./internal/testbed/install            # or: make install-check
//	go run ./internal/testbed/install -v         # each step with its duration
//	go run ./internal/testbed/install -offline   # no network: dependencies from your module cache only
//	go run ./internal/testbed/install -keep      # keep the proxy and the module, print where
package main

import (
	"archive/zip"
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"
)

const rootPath = "github.com/tierguard/tierguard"

//go:embed testdata/consumer/main.go
var consumer []byte

var verbose, offline bool

// module is one module of the checkout to publish.
type module struct {
	Path    string // module path
	Dir     string // directory relative to the checkout, "." for the root
	Version string
}

func main() {
	keep := flag.Bool("keep", false, "keep the proxy and the consumer module and print their directories")
	flag.BoolVar(&verbose, "v", false, "print each step and its duration")
	flag.BoolVar(&offline, "offline", false, "use no network proxy: tierguard from the file proxy, everything else from your module cache")
	flag.Parse()
	log.SetFlags(0)
	log.SetPrefix("install-check: ")
	if err := run(*keep); err != nil {
		log.Fatal(err)
	}
}

func run(keep bool) error {
	start := time.Now()
	root, err := gitRoot()
	if err != nil {
		return err
	}
	files, err := trackedFiles(root)
	if err != nil {
		return err
	}
	mods, moduleDirs, err := modules(root, files)
	if err != nil {
		return err
	}
	if err := importsEvery(mods); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "tierguard-install-")
	if err != nil {
		return err
	}
	proxy := filepath.Join(tmp, "proxy")
	work := filepath.Join(tmp, "consumer")
	userCache, err := goEnv("GOMODCACHE")
	if err != nil {
		return err
	}
	// The consumer uses your module cache, so that the dependencies it
	// builds are the ones your builds have compiled already. tierguard's
	// own entries there come from this check alone (go.work stands in for
	// the modules everywhere else): they are dropped before and after, so
	// that each run unpacks what the checkout holds now.
	if err := dropCached(userCache); err != nil {
		return err
	}
	defer func() {
		if err := dropCached(userCache); err != nil {
			log.Print(err)
		}
		if keep {
			log.Printf("kept proxy %s and module %s", proxy, work)
			return
		}
		_ = os.RemoveAll(tmp)
	}()
	for _, m := range mods {
		if err := publish(proxy, root, files, moduleDirs, m); err != nil {
			return fmt.Errorf("%s: %w", m.Path, err)
		}
	}
	log.Printf("proxy of %d modules in %s", len(mods), proxy)

	userProxy, err := goEnv("GOPROXY")
	if err != nil {
		return err
	}
	chain := "file://" + filepath.ToSlash(proxy)
	if userCache != "" {
		chain += ",file://" + filepath.ToSlash(filepath.Join(userCache, "cache", "download"))
	}
	switch {
	case offline:
		chain += ",off"
	case userProxy != "":
		chain += "," + userProxy
	}
	env := append(os.Environ(),
		"GOWORK=off",
		"GOFLAGS=-mod=mod",
		"GOPROXY="+chain,
		"GONOSUMDB="+rootPath+","+rootPath+"/*",
		"GOPRIVATE=",
		"GONOPROXY=",
		// The go command indexes module-cache directories once, as if
		// they never changed; this check rewrites tierguard's at the same
		// version, so the index would describe an earlier checkout.
		"GODEBUG="+strings.Trim(os.Getenv("GODEBUG")+",goindex=0", ","),
	)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(work, "main.go"), consumer, 0o644); err != nil {
		return err
	}
	steps := [][]string{{"go", "mod", "init", "example.com/consumer"}}
	for _, m := range mods {
		steps = append(steps, []string{"go", "get", m.Path + "@" + m.Version})
	}
	steps = append(steps,
		[]string{"go", "mod", "tidy"},
		[]string{"go", "vet", "."},
		[]string{"go", "build", "-o", "consumer", "."},
		[]string{"./consumer"},
	)
	for _, s := range steps {
		t := time.Now()
		cmd := exec.Command(s[0], s[1:]...)
		cmd.Dir, cmd.Env = work, env
		out, err := cmd.CombinedOutput()
		if verbose {
			log.Printf("%.1fs %s", time.Since(t).Seconds(), strings.Join(s, " "))
		}
		if err != nil {
			return fmt.Errorf("%s: %w\n%s", strings.Join(s, " "), err, out)
		}
		if s[0] == "./consumer" {
			os.Stdout.Write(out)
		}
	}
	// Every tierguard module the consumer resolved came from the proxy at
	// the pinned version, none from anywhere else.
	cmd := exec.Command("go", "list", "-m", "-json", "all")
	cmd.Dir, cmd.Env = work, env
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list -m all: %w", err)
	}
	if err := resolvedAsPublished(out, mods); err != nil {
		return err
	}
	log.Printf("ok: go get of %d modules and a program using each, in %.0fs", len(mods), time.Since(start).Seconds())
	return nil
}

// dropCached removes tierguard's modules from the module cache (which the
// go command makes read-only).
func dropCached(cache string) error {
	if cache == "" {
		return nil
	}
	var errs []error
	// The root module unpacks into tierguard@<version>, the nested ones
	// below tierguard/; the downloads are all below tierguard/.
	dirs, _ := filepath.Glob(filepath.Join(cache, filepath.FromSlash(rootPath)+"@*"))
	dirs = append(dirs,
		filepath.Join(cache, filepath.FromSlash(rootPath)),
		filepath.Join(cache, "cache", "download", filepath.FromSlash(rootPath)),
	)
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e fs.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				_ = os.Chmod(p, 0o755)
			}
			return nil
		})
		if err := os.RemoveAll(d); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func gitRoot() (string, error) {
	out, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("not in a git checkout: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func goEnv(name string) (string, error) {
	out, err := exec.Command("go", "env", name).Output()
	if err != nil {
		return "", fmt.Errorf("go env %s: %w", name, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// trackedFiles are the files git tracks, as in the working tree: what a
// tag would publish, with today's edits.
func trackedFiles(root string) ([]string, error) {
	cmd := exec.Command("git", "ls-files", "-z")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git ls-files: %w", err)
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f == "" {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, f)); errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the working tree
		}
		files = append(files, f)
	}
	return files, nil
}

var (
	moduleLine = regexp.MustCompile(`(?m)^module\s+(\S+)`)
	// pinLine matches a tierguard requirement or a replace of one, in a
	// block or on one line.
	pinLine = regexp.MustCompile(`(?m)^\s*(?:(?:require|replace)\s+)?(` + regexp.QuoteMeta(rootPath) + `(?:/\S+)?)\s+(v\S+)`)
)

// modules are the released modules of the checkout with their versions:
// every go.mod but those of examples and the test bed, each at the version
// any go.mod or go.work pins it at (all pins of one module must agree); a
// module nothing pins is at the root's version. It also returns the
// directory of every module, released or not.
func modules(root string, files []string) ([]module, []string, error) {
	pins := map[string]string{}
	var mods []module
	var dirs []string
	var errs []error
	for _, f := range files {
		base := path.Base(f)
		if base != "go.mod" && f != "go.work" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, nil, err
		}
		for _, m := range pinLine.FindAllStringSubmatch(string(data), -1) {
			if v, ok := pins[m[1]]; ok && v != m[2] {
				errs = append(errs, fmt.Errorf("%s pins %s at %s, another file at %s", f, m[1], m[2], v))
			}
			pins[m[1]] = m[2]
		}
		if base != "go.mod" {
			continue
		}
		dir := path.Dir(f)
		dirs = append(dirs, dir)
		if dir == "examples" || strings.HasPrefix(dir, "internal/") {
			continue // programs and the test bed: not released
		}
		mm := moduleLine.FindStringSubmatch(string(data))
		if mm == nil {
			return nil, nil, fmt.Errorf("%s: no module line", f)
		}
		want := rootPath
		if dir != "." {
			want += "/" + dir
		}
		if mm[1] != want {
			errs = append(errs, fmt.Errorf("%s: module %s, want %s", f, mm[1], want))
		}
		mods = append(mods, module{Path: mm[1], Dir: dir})
	}
	if len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	if pins[rootPath] == "" {
		return nil, nil, errors.New("no go.mod requires the root module: no version to publish it at")
	}
	for i := range mods {
		mods[i].Version = pins[mods[i].Path]
		if mods[i].Version == "" {
			mods[i].Version = pins[rootPath]
		}
	}
	slices.SortFunc(mods, func(a, b module) int { return strings.Compare(a.Path, b.Path) })
	return mods, dirs, nil
}

// importsEvery checks that the consumer imports every released module, so
// that a new module cannot be left out of the check.
func importsEvery(mods []module) error {
	var missing []string
	for _, m := range mods {
		if !bytes.Contains(consumer, []byte(`"`+m.Path+`"`)) && !bytes.Contains(consumer, []byte(`"`+m.Path+`/`)) {
			missing = append(missing, m.Path)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("testdata/consumer/main.go does not import %s", strings.Join(missing, ", "))
	}
	return nil
}

// publish writes one module version into the proxy directory.
func publish(proxy, root string, files, moduleDirs []string, m module) error {
	dir := filepath.Join(proxy, filepath.FromSlash(escape(m.Path)), "@v")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	gomod, err := os.ReadFile(filepath.Join(root, m.Dir, "go.mod"))
	if err != nil {
		return err
	}
	info, _ := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, time.Now().UTC().Truncate(time.Second)})
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	n := 0
	for _, f := range files {
		rel, ok := inModule(f, m.Dir, moduleDirs)
		if !ok {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return err
		}
		w, err := zw.Create(m.Path + "@" + m.Version + "/" + rel)
		if err != nil {
			return err
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
		n++
	}
	if err := zw.Close(); err != nil {
		return err
	}
	if n == 0 {
		return errors.New("no files")
	}
	for name, data := range map[string][]byte{
		"list":              []byte(m.Version + "\n"),
		m.Version + ".info": info,
		m.Version + ".mod":  gomod,
		m.Version + ".zip":  buf.Bytes(),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// inModule reports whether the tracked file f belongs to the module in dir
// (and not to a module nested below it, released or not: the go command
// leaves any directory with a go.mod out of the module above it), and its
// path inside the module.
func inModule(f, dir string, moduleDirs []string) (string, bool) {
	rel := f
	if dir != "." {
		if !strings.HasPrefix(f, dir+"/") {
			return "", false
		}
		rel = strings.TrimPrefix(f, dir+"/")
	}
	for _, o := range moduleDirs {
		if o != dir && (dir == "." || strings.HasPrefix(o, dir+"/")) && strings.HasPrefix(f, o+"/") {
			return "", false
		}
	}
	return rel, true
}

// escape is the module proxy's case encoding: an upper-case letter is "!"
// and its lower case.
func escape(p string) string {
	var b strings.Builder
	for _, r := range p {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}

// resolvedAsPublished checks the consumer's build list: each published
// module at its version, and no tierguard module the proxy does not hold.
func resolvedAsPublished(listJSON []byte, mods []module) error {
	want := map[string]string{}
	for _, m := range mods {
		want[m.Path] = m.Version
	}
	dec := json.NewDecoder(bytes.NewReader(listJSON))
	seen := map[string]bool{}
	var errs []error
	for dec.More() {
		var m struct {
			Path    string
			Version string
			Main    bool
			Replace *struct{ Path string }
		}
		if err := dec.Decode(&m); err != nil {
			return err
		}
		if m.Main || (m.Path != rootPath && !strings.HasPrefix(m.Path, rootPath+"/")) {
			continue
		}
		seen[m.Path] = true
		switch {
		case m.Replace != nil:
			errs = append(errs, fmt.Errorf("%s is replaced by %s", m.Path, m.Replace.Path))
		case want[m.Path] == "":
			errs = append(errs, fmt.Errorf("%s@%s is not a published module", m.Path, m.Version))
		case want[m.Path] != m.Version:
			errs = append(errs, fmt.Errorf("%s resolved at %s, published at %s", m.Path, m.Version, want[m.Path]))
		}
	}
	for _, m := range mods {
		if !seen[m.Path] {
			errs = append(errs, fmt.Errorf("%s is not in the build list", m.Path))
		}
	}
	return errors.Join(errs...)
}
