package redisspend_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tierguard/tierguard/fallback"
	"github.com/tierguard/tierguard/fallback/spend"
	"github.com/tierguard/tierguard/fallback/spend/redisspend"
	"github.com/tierguard/tierguard/internal/testbed/redisserver"
)

// reply is the fake tier's answer; each is billed 60 tokens in, 40 out.
type reply struct{ usage fallback.Usage }

type billedTier struct{}

func (billedTier) Name() string { return "pro" }
func (billedTier) Call(ctx context.Context, _ string) (reply, error) {
	u := fallback.Usage{InputTokens: 60, OutputTokens: 40}
	fallback.Report(ctx, fallback.Reply{Usage: u, HasUsage: true})
	return reply{usage: u}, nil
}

const tokensPerRequest = 100

var prices = func() *spend.Prices {
	p, err := spend.NewPrices(spend.PriceTable{Currency: "USD", Prices: []spend.Price{{Model: "pro",
		Rates: spend.Rates{Input: spend.MustParseAmount("1.25"), Output: spend.MustParseAmount("10")}}}})
	if err != nil {
		panic(err)
	}
	return p
}()

// costPerRequest is 60 tokens at 1.25 and 40 at 10 per million, in
// nano-units: 1250 and 10000 a token.
const costPerRequest = spend.Amount(60*1250 + 40*10000)

// node is one process's ledger and chain, sharing limits through addr.
type node struct {
	ledger *spend.Ledger
	chain  *fallback.Chain[string, reply]
	store  *redisspend.Store
	done   atomic.Int64 // requests answered
}

func newNode(t testing.TB, addr, prefix string, limit int64) *node {
	t.Helper()
	store, err := redisspend.New(newClient(t, addr), redisspend.Options{Prefix: prefix})
	require.NoError(t, err)
	l, err := spend.New(spend.Config{
		Prices:       prices,
		Tenants:      map[string]spend.Allowance{"acme": {DailyTokens: limit}},
		Store:        store,
		SyncInterval: 20 * time.Millisecond,
		SyncTimeout:  200 * time.Millisecond,
	})
	require.NoError(t, err)
	c, err := fallback.New(fallback.Config[string, reply]{Stages: []fallback.Stage[string, reply]{{Tier: billedTier{}, Model: "pro"}}})
	require.NoError(t, err)
	_, err = l.Attach(c)
	require.NoError(t, err)
	return &node{ledger: l, chain: c, store: store}
}

// request admits and runs one request.
func (n *node) request() error {
	tk, err := n.ledger.Admit(context.Background(), spend.Request{Tenant: "acme"}, spend.Estimate{Tokens: tokensPerRequest})
	if err != nil {
		return err
	}
	defer tk.End()
	if _, err := n.chain.Do(tk, "q"); err != nil {
		return err
	}
	n.done.Add(1)
	return nil
}

// started is when the test binary started, to find the days a test's
// requests fell in.
var started = time.Now()

// fleet reads the tenant's figures from Redis: today's, and yesterday's
// too if the test began before midnight (UTC).
func fleet(t *testing.T, s *redisspend.Store) (int64, spend.Amount) {
	t.Helper()
	var tok int64
	var cost spend.Amount
	ids := []int64{dayID(time.Now())}
	if d := dayID(started); d != ids[0] {
		ids = append(ids, d)
	}
	for _, id := range ids {
		tot, err := s.Totals(context.Background(), "acme", spend.Daily, id)
		require.NoError(t, err)
		tok += tot.Tokens
		cost += tot.Cost
	}
	return tok, cost
}

func dayID(t time.Time) int64 {
	y, m, d := t.UTC().Date()
	return int64(y)*10000 + int64(m)*100 + int64(d)
}

// Two ledgers in two OS processes share a tenant through Redis, each
// through a connection that loses every third reply after Redis ran the
// commands: the exchanges fail and are made again. When both are done the
// fleet's figures are exactly what the two processes used, nothing counted
// twice.
func TestTwoProcessesRetriedWritesNeverDoubleCount(t *testing.T) {
	if addr := os.Getenv(childEnv); addr != "" {
		childProcess(t, addr, os.Getenv(childEnv+"_PREFIX"))
		return
	}
	addr := sharedAddr(t)
	p := prefix(t)
	exe, err := os.Executable()
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 45*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, "-test.run=^TestTwoProcessesRetriedWritesNeverDoubleCount$", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+addr, childEnv+"_PREFIX="+p)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())

	px := newProxy(t, addr, 3)
	n := newNode(t, px.addr(), p, 1<<40)
	for range 300 {
		require.NoError(t, n.request())
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, n.ledger.Close())

	var childDone, childDropped int64
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "child: "); ok {
			_, err := fmt.Sscanf(rest, "done=%d dropped=%d", &childDone, &childDropped)
			require.NoError(t, err, rest)
		}
	}
	require.NoError(t, cmd.Wait())
	require.Positive(t, childDone, "the child reported")
	assert.Positive(t, px.dropped.Load(), "this process's writes were retried")
	assert.Positive(t, childDropped, "the child's writes were retried")

	direct := newStore(t, addr, p)
	tok, cost := fleet(t, direct)
	want := n.done.Load() + childDone
	assert.Equal(t, want*tokensPerRequest, tok, "%d requests of %d tokens", want, tokensPerRequest)
	assert.Equal(t, spend.Amount(want)*costPerRequest, cost)
	t.Logf("%d + %d requests; %d and %d replies lost", n.done.Load(), childDone, px.dropped.Load(), childDropped)
}

// childProcess is the second process: its own ledger, its own lossy
// connection, its own requests; it reports how many it made.
func childProcess(t *testing.T, addr, p string) {
	px := newProxy(t, addr, 3)
	n := newNode(t, px.addr(), p, 1<<40)
	for range 300 {
		require.NoError(t, n.request())
		time.Sleep(time.Millisecond)
	}
	require.NoError(t, n.ledger.Close())
	fmt.Printf("child: done=%d dropped=%d\n", n.done.Load(), px.dropped.Load())
}

// Redis is killed in the middle of a run and started again, empty. The
// requests never stop (the limits fail open and nothing waits on Redis);
// once Redis is back, within two sync intervals and a reconnection, the
// fleet's figures in Redis and in both ledgers are exactly what every
// request used.
func TestRedisKilledMidRun(t *testing.T) {
	srv := redisserver.Start(t)
	p := prefix(t)
	a, b := newNode(t, srv.Addr, p, 1<<40), newNode(t, srv.Addr, p, 1<<40)
	var storeErrs atomic.Int64
	a.ledger.Observe(func(e spend.Event) {
		if e.Kind == spend.StoreFailed {
			storeErrs.Add(1)
		}
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var failed atomic.Int64
	for _, n := range []*node{a, b, a, b} {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := n.request(); err != nil {
					failed.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, what)
	}
	total := func() int64 { return a.done.Load() + b.done.Load() }
	waitFor("requests before the kill", func() bool { return total() >= 100 })
	direct := newStore(t, srv.Addr, p)
	waitFor("the fleet's figures reach Redis", func() bool { tok, _ := fleet(t, direct); return tok > 0 })

	srv.Kill()
	atKill := total()
	waitFor("the ledgers notice", func() bool { return storeErrs.Load() > 0 })
	waitFor("requests while Redis is down", func() bool { return total() >= atKill+200 })
	during := total() - atKill

	require.NoError(t, srv.Restart())
	restarted := time.Now()
	waitFor("requests after the restart", func() bool { return total() >= atKill+during+100 })
	close(stop)
	wg.Wait()
	require.Zero(t, failed.Load(), "no request failed because of Redis")

	want := total() * tokensPerRequest
	waitFor("Redis holds every request once", func() bool { tok, _ := fleet(t, direct); return tok == want })
	reconciled := time.Since(restarted)
	waitFor("both ledgers agree with Redis", func() bool {
		return a.ledger.Use("acme")[spend.DailyTokens].Used == want && b.ledger.Use("acme")[spend.DailyTokens].Used == want
	})
	tok, cost := fleet(t, direct)
	assert.Equal(t, want, tok)
	assert.Equal(t, spend.Amount(total())*costPerRequest, cost)
	require.NoError(t, a.ledger.Close())
	require.NoError(t, b.ledger.Close())
	t.Logf("%d requests (%d while Redis was down); Redis reconciled %v after the restart", total(), during, reconciled.Round(time.Millisecond))
}
