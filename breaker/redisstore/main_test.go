package redisstore_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tierguard/tierguard/breaker/redisstore"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

const (
	// childEnv marks the test binary re-executed as a second process; it
	// holds the address of the Redis server to use.
	childEnv = "TIERGUARD_REDISSTORE_CHILD"
	// addrEnv tells the internal tests where the package's server is.
	addrEnv = "TIERGUARD_REDISSTORE_ADDR"
)

// sharedServer is the Redis server most tests use (each with its own key
// prefix); tests that kill or pause Redis start their own.
var sharedServer *redisserver.Server

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(m.Run())
	}
	redis.SetLogger(quietLogger{})
	sharedServer = redisserver.StartShared("redisstore")
	if sharedServer != nil {
		// For the package's internal tests.
		_ = os.Setenv(addrEnv, sharedServer.Addr)
	}
	goleak.VerifyTestMain(redisserver.StopAfter(m, sharedServer))
}

// quietLogger keeps go-redis from logging reconnection attempts while the
// tests kill Redis on purpose.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// sharedAddr returns the address of the package's server.
func sharedAddr(t *testing.T) string {
	t.Helper()
	return redisserver.Need(t, sharedServer).Addr
}

// redirect is a dial target a test can move, as a DNS name or a service
// address moves when Redis is replaced: clients made by redirectClient dial
// whatever address it holds.
type redirect struct{ addr atomic.Pointer[string] }

func (r *redirect) set(addr string) { r.addr.Store(&addr) }

// redirectClient returns a go-redis client that dials r's address, closed
// at the end of the test.
func redirectClient(t testing.TB, r *redirect) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: "redirected", Dialer: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, *r.addr.Load())
	}})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// newClient returns a go-redis client closed at the end of the test.
func newClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

var (
	prefixes sync.Map // testing.TB -> string
	runs     atomic.Int64
)

// prefix is a key prefix of the test's own, new for every run of it (with
// -count) so that no run sees the keys of another.
func prefix(t testing.TB) string {
	p, _ := prefixes.LoadOrStore(t, "tgtest:"+strings.NewReplacer("/", ".", " ", "_").Replace(t.Name())+
		":"+strconv.Itoa(os.Getpid())+"."+strconv.FormatInt(runs.Add(1), 10)+":")
	return p.(string)
}

// newStore returns a store on its own client (a separate "process"),
// closed at the end of the test.
func newStore(t testing.TB, addr string, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	return newStoreOn(t, newClient(t, addr), opts)
}

// newStoreOn returns a store on client c, closed at the end of the test.
func newStoreOn(t testing.TB, c redis.UniversalClient, opts redisstore.Options) *redisstore.Store {
	t.Helper()
	if opts.Prefix == "" {
		opts.Prefix = prefix(t)
	}
	s, err := redisstore.New(c, opts)
	require.NoError(t, err)
	t.Cleanup(func() { require.NoError(t, s.Close()) })
	return s
}

// waitSubscribed waits until n stores listen on the channel, so that no
// publication is missed by a store still connecting.
func waitSubscribed(t *testing.T, addr, channel string, n int) {
	t.Helper()
	c := newClient(t, addr)
	require.Eventually(t, func() bool {
		m, err := c.PubSubNumSub(context.Background(), channel).Result()
		return err == nil && m[channel] >= int64(n)
	}, 10*time.Second, 5*time.Millisecond, "stores subscribed")
}
