// Package snippets holds the test that compiles every Go snippet of the
// repository's README files: README.md and each module's README.md.
//
// The test reads the README files when it runs, so a snippet is checked
// as it is written today. Each ```go block becomes a package of its own:
// its import block (if any) and its type and func declarations at the top
// level, every other line as the body of a function that returns an error,
// and the imports of the packages it names (the standard library's,
// tierguard's and the SDKs' usual names). What a snippet uses but leaves to
// the reader — the user's own functions, values and types — comes from
// the README's stand-ins file in testdata/standins, declared there by
// name; nothing else is added. A snippet whose user code differs from its
// README's other snippets names a stand-ins file of its own with
// <!-- snippet: standins NAME --> before its fence (testdata/standins/NAME.go). A variable or import a snippet declares and
// does not use is used (`_ = x`), as the rest of the reader's program
// would. Then `go vet` runs over every package: the compiler's type
// checks, without generating code, and vet's analyzers. With
// SNIPPETS_BUILD=1 the test also runs `go build` (half a minute more).
//
// A snippet that is not meant to compile (pseudo-code, an excerpt) is
// marked by an HTML comment on the line before its fence:
//
//	<!-- snippet: no-compile (why) -->
//
// The test counts the marked snippets and logs them.
package snippets
