package riverjob_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// pgBinDir finds the PostgreSQL server binaries: $TIERGUARD_PG_BINDIR, or
// the newest /usr/lib/postgresql/<version>/bin of Debian's packages, or
// the directory of initdb on PATH. The test fails when there is none:
// .ci/run installs the postgresql package.
func pgBinDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TIERGUARD_PG_BINDIR"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return pgVersion(dirs[i]) < pgVersion(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("PostgreSQL server binaries not found (initdb, postgres): install Debian's postgresql package, or set TIERGUARD_PG_BINDIR")
	return ""
}

func pgVersion(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// pgServer is a PostgreSQL server of the test's own, in a temporary data
// directory, listening on a free loopback port (no Unix socket).
type pgServer struct {
	DSN  string
	cmd  *exec.Cmd
	dir  string
	done chan error
}

// startPostgres initialises a cluster and starts its server; it is stopped
// and removed when the test ends. PostgreSQL refuses to run as root: as
// root the server runs as the "postgres" user of Debian's package (or
// "nobody").
func startPostgres(t testing.TB) *pgServer {
	t.Helper()
	bin := pgBinDir(t)
	dir, err := os.MkdirTemp("", "riverjob-pg-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cred := serverCredential(t)
	if cred != nil {
		require.NoError(t, os.Chown(dir, int(cred.Uid), int(cred.Gid)))
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "river", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	out, err := initdb.CombinedOutput()
	require.NoError(t, err, "initdb: %s", out)

	for try := 0; ; try++ {
		port := freePort(t)
		s := &pgServer{dir: dir, done: make(chan error, 1), DSN: fmt.Sprintf("postgres://river@127.0.0.1:%d/postgres?sslmode=disable", port)}
		s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", "",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=100")
		s.cmd.Dir = dir
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		var logBuf strings.Builder
		s.cmd.Stdout, s.cmd.Stderr = &logBuf, &logBuf
		require.NoError(t, s.cmd.Start())
		go func() { s.done <- s.cmd.Wait() }()
		if s.ready(t) {
			t.Cleanup(s.stop)
			return s
		}
		s.stop()
		if try == 2 {
			t.Fatalf("postgres did not start: %s", logBuf.String())
		}
	}
}

// ready waits until the server accepts connections, or has exited.
func (s *pgServer) ready(t testing.TB) bool {
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			s.done <- err
			return false
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		conn, err := pgx.Connect(ctx, s.DSN)
		cancel()
		if err == nil {
			_ = conn.Close(context.Background())
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("postgres not ready after 30s")
	return false
}

// stop shuts the server down (SIGINT: fast shutdown), killing it if it
// takes more than ten seconds.
func (s *pgServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGINT)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.done <- nil // later stops return at once
}

// serverCredential is the user the server runs as: nil when the test does
// not run as root.
func serverCredential(t testing.TB) *syscall.Credential {
	if os.Geteuid() != 0 {
		return nil
	}
	for _, name := range []string{"postgres", "nobody"} {
		u, err := user.Lookup(name)
		if err != nil {
			continue
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	t.Fatal("running as root, and neither a postgres nor a nobody user exists to run the server as")
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// dieWithParent kills a child process if the test binary dies first.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
