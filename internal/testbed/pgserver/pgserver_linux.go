package pgserver

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// User is the superuser of the cluster; it needs no password.
const User = "river"

// Server is a running PostgreSQL server.
type Server struct {
	// DSN is the URL to connect to the "postgres" database as User.
	DSN string
	// Port is the loopback port it listens on.
	Port int

	bin  string
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  *strings.Builder
	once sync.Once
}

// BinDir finds the server binaries: $TIERGUARD_PG_BINDIR, the newest
// /usr/lib/postgresql/<version>/bin, or the directory of initdb on PATH.
// It fails the test when there are none.
func BinDir(t testing.TB) string {
	t.Helper()
	if d := os.Getenv("TIERGUARD_PG_BINDIR"); d != "" {
		return d
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) < version(dirs[j]) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "initdb")); err == nil {
			return dirs[i]
		}
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	t.Fatal("pgserver: PostgreSQL server binaries (initdb, postgres) not found: install Debian's postgresql package, or set TIERGUARD_PG_BINDIR")
	return ""
}

func version(dir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return v
}

// Start initialises a cluster and starts its server, tuned for tests
// (fsync off); it is stopped and its directory removed when the test
// ends.
func Start(t testing.TB) *Server {
	t.Helper()
	bin := BinDir(t)
	cred := credential(t)
	// The server's user must reach its directory: under root, /tmp rather
	// than a $TMPDIR that may sit in root's own home.
	base := ""
	if cred != nil {
		base = "/tmp"
	}
	dir, err := os.MkdirTemp(base, "tierguard-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			t.Fatal(err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", User, "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
	if out, err := initdb.CombinedOutput(); err != nil {
		t.Fatalf("pgserver: initdb: %v: %s", err, out)
	}
	for try := 1; ; try++ {
		s := &Server{Port: freePort(t), bin: bin, done: make(chan struct{}), log: &strings.Builder{}}
		s.DSN = fmt.Sprintf("postgres://%s@127.0.0.1:%d/postgres?sslmode=disable", User, s.Port)
		s.cmd = exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(s.Port), "-h", "127.0.0.1", "-k", "",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off", "-c", "max_connections=200")
		s.cmd.Dir = dir
		s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred, Pdeathsig: syscall.SIGKILL}
		s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
		if err := s.cmd.Start(); err != nil {
			t.Fatalf("pgserver: %v", err)
		}
		go func() { s.err = s.cmd.Wait(); close(s.done) }()
		if s.ready() {
			t.Cleanup(s.Stop)
			return s
		}
		s.Stop()
		if try == 3 {
			t.Fatalf("pgserver: postgres did not start: %v\n%s", s.err, s.log.String())
		}
	}
}

// ready waits until pg_isready says the server accepts connections, or
// the server has exited.
func (s *Server) ready() bool {
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		select {
		case <-s.done:
			return false
		default:
		}
		check := exec.Command(filepath.Join(s.bin, "pg_isready"), "-q", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", User, "-d", "postgres", "-t", "1")
		if check.Run() == nil {
			return true
		}
	}
	return false
}

// Stop shuts the server down (SIGINT: fast shutdown), and kills it if it
// takes more than ten seconds. It may be called more than once.
func (s *Server) Stop() {
	s.once.Do(func() {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	})
}

// credential is the user the server runs as: nil unless the test runs as
// root.
func credential(t testing.TB) *syscall.Credential {
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
	t.Fatal("pgserver: running as root, and there is neither a postgres nor a nobody user to run the server as")
	return nil
}

func freePort(t testing.TB) int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
