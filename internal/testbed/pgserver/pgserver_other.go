//go:build !linux

package pgserver

import "testing"

// User is the superuser of the cluster; it needs no password.
const User = "river"

// Server is a running PostgreSQL server.
type Server struct {
	DSN  string
	Port int
}

// Start fails the test: starting a server of the test's own needs Linux.
func Start(t testing.TB) *Server {
	t.Helper()
	t.Fatal("pgserver: starting a PostgreSQL server of the test's own needs Linux")
	return nil
}

// Stop does nothing.
func (s *Server) Stop() {}
