// Package redisserver starts redis-server processes for the tests of the
// Redis stores: each on a free loopback port, in a temporary directory,
// without persistence, killed and removed when the tests are done. Tests
// restart a server on the same address (it comes back empty), kill it
// (SIGKILL: every connection cut), and freeze and thaw it (SIGSTOP and
// SIGCONT: connections stay open and commands wait unanswered).
//
// A package's tests share one server, started in TestMain, and start their
// own when they break it:
//
//	var shared *redisserver.Server
//
//	func TestMain(m *testing.M) {
//		shared = redisserver.StartShared("mystore")
//		goleak.VerifyTestMain(redisserver.StopAfter(m, shared))
//	}
//
//	func TestSomething(t *testing.T) {
//		addr := redisserver.Need(t, shared).Addr
//		own := redisserver.Start(t) // stopped when the test ends
//		own.Kill()
//		require.NoError(t, own.Restart())
//	}
//
// A missing redis-server binary fails the run (.ci/run installs Debian's
// redis-server package); setting TIERGUARD_SKIP_REDIS skips those tests
// instead. The package speaks RESP by hand, the little it needs to, so
// that waiting for a server starts no client goroutine and the root module
// depends on no Redis client. On Linux a server dies with the test binary
// (it gets SIGKILL when its parent goes); elsewhere Freeze and Thaw send
// their signals with kill(1).
package redisserver
