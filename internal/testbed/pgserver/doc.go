// Package pgserver starts a PostgreSQL server of a test's own: a fresh
// cluster in a temporary directory, on a free loopback port, without a
// Unix socket, stopped and removed when the test ends. It uses the server
// binaries of Debian's postgresql package (initdb, postgres, pg_isready)
// and nothing else: no client library, no running cluster.
//
//	srv := pgserver.Start(t)
//	pool, err := pgxpool.New(ctx, srv.DSN) // postgres://river@127.0.0.1:PORT/postgres
//
// A test that needs the server fails, never skips, when the binaries are
// missing: .ci/run installs the package. PostgreSQL refuses to run as
// root; as root the server runs as the package's "postgres" user (or
// "nobody").
package pgserver
