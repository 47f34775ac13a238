package redisspend

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/spend"
)

// Defaults applied to zero fields of Options.
const (
	DefaultPrefix       = "tierguard:spend:"
	DefaultKeepAfterEnd = 48 * time.Hour
)

// Options configures a Store. The zero value is a working configuration.
type Options struct {
	// Prefix starts every key; DefaultPrefix when empty. Use one prefix
	// per environment (or service) that must not share limits. It must be
	// printable, without spaces, '{' or '}'.
	Prefix string
	// Process names this process's fields. Empty means a random id, new
	// for every Store: a process that restarts starts a new cumulative
	// figure, and the old one still counts. Set it only to a name unique
	// to one live process at a time.
	Process string
	// KeepAfterEnd is how long a period's figures outlive the period.
	// DefaultKeepAfterEnd when zero.
	KeepAfterEnd time.Duration
}

// Store shares spend limits through Redis; see the package documentation.
// It starts no goroutine and holds no connection of its own: the client
// stays the caller's. One Store serves one spend.Ledger.
type Store struct {
	client redis.UniversalClient
	prefix string
	proc   string
	keep   time.Duration
}

var _ spend.Store = (*Store)(nil)

// New returns a Store over client. It does no I/O.
func New(client redis.UniversalClient, opts Options) (*Store, error) {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if client == nil {
		bad("a client is required")
	}
	prefix := opts.Prefix
	if prefix == "" {
		prefix = DefaultPrefix
	}
	if !validName(prefix, 128) {
		bad("Prefix must be at most 128 printable characters without '{', '}' or spaces, got %q", prefix)
	}
	proc := opts.Process
	if proc == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		proc = hex.EncodeToString(b[:])
	}
	if !validName(proc, 64) || strings.Contains(proc, ":") {
		bad("Process must be at most 64 printable characters without ':', '{', '}' or spaces, got %q", proc)
	}
	if opts.KeepAfterEnd < 0 {
		bad("KeepAfterEnd must not be negative, got %v", opts.KeepAfterEnd)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("redisspend: invalid options: %w", err)
	}
	keep := opts.KeepAfterEnd
	if keep == 0 {
		keep = DefaultKeepAfterEnd
	}
	return &Store{client: client, prefix: prefix, proc: proc, keep: keep}, nil
}

func validName(s string, n int) bool {
	return s != "" && len(s) <= n && !strings.ContainsFunc(s, func(r rune) bool {
		return r == '{' || r == '}' || unicode.IsSpace(r) || !unicode.IsPrint(r)
	})
}

// Process returns the name of this process's fields.
func (s *Store) Process() string { return s.proc }

// Key returns the key of a tenant's period.
func (s *Store) Key(tenant string, p spend.Period, id int64) string {
	sum := sha256.Sum256([]byte(tenant))
	kind := "d"
	if p == spend.Monthly {
		kind = "m"
	}
	return s.prefix + "{" + hex.EncodeToString(sum[:8]) + "}:" + kind + ":" + strconv.FormatInt(id, 10)
}

// syncScript keeps, for this process, the larger of the stored and the
// sent cumulative figures, sets the key's expiry and returns every field.
// The figures are compared as decimal strings (Lua's numbers are doubles,
// exact only to 2^53), and summed by the caller.
//
//	KEYS[1]  the period's hash
//	ARGV[1]  field of this process's tokens, ARGV[2] its value
//	ARGV[3]  field of this process's cost,   ARGV[4] its value
//	ARGV[5]  expiry, Unix ms
var syncScript = redis.NewScript(`
local function greater(a, b)
  if b == false then return true end
  if #a ~= #b then return #a > #b end
  return a > b
end
for i = 1, 3, 2 do
  local cur = redis.call('HGET', KEYS[1], ARGV[i])
  if greater(ARGV[i + 1], cur) then
    redis.call('HSET', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
return redis.call('HGETALL', KEYS[1])
`)

// Sync implements spend.Store: one pipeline for every share.
func (s *Store) Sync(ctx context.Context, shares []spend.Share) error {
	return s.sync(ctx, shares, true)
}

func (s *Store) sync(ctx context.Context, shares []spend.Share, reload bool) error {
	if len(shares) == 0 {
		return nil
	}
	ft, fc := "t:"+s.proc, "c:"+s.proc
	cmds := make([]*redis.Cmd, len(shares))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range shares {
			sh := &shares[i]
			expire := sh.End.Add(s.keep).UnixMilli()
			cmds[i] = syncScript.EvalSha(ctx, p, []string{s.Key(sh.Tenant, sh.Period, sh.ID)},
				ft, strconv.FormatInt(max(sh.Tokens, 0), 10), fc, strconv.FormatInt(max(int64(sh.Cost), 0), 10), expire)
		}
		return nil
	})
	if err != nil && reload && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis lost its script cache (a restart, SCRIPT FLUSH): load it
		// and send the batch again, once; the writes are idempotent.
		if lerr := syncScript.Load(ctx, s.client).Err(); lerr != nil {
			return fmt.Errorf("redisspend: loading the script: %w", lerr)
		}
		return s.sync(ctx, shares, false)
	}
	var failed error
	for i, c := range cmds {
		sh := &shares[i]
		if c.Err() != nil {
			if failed == nil {
				failed = c.Err()
			}
			continue
		}
		vals, verr := c.StringSlice()
		if verr != nil {
			failed = verr
			continue
		}
		tok, cost, perr := sum(vals)
		if perr != nil {
			failed = perr
			continue
		}
		sh.FleetTokens, sh.FleetCost, sh.Synced = tok, spend.Amount(cost), true
	}
	if err == nil {
		err = failed
	}
	if err != nil {
		return fmt.Errorf("redisspend: sync: %w", err)
	}
	return nil
}

// sum adds the processes' figures of an HGETALL reply, saturating.
func sum(kv []string) (tokens, cost int64, err error) {
	for i := 0; i+1 < len(kv); i += 2 {
		v, perr := strconv.ParseInt(kv[i+1], 10, 64)
		if perr != nil || v < 0 {
			return 0, 0, fmt.Errorf("field %q holds %q", kv[i], kv[i+1])
		}
		switch {
		case strings.HasPrefix(kv[i], "t:"):
			tokens = addSat(tokens, v)
		case strings.HasPrefix(kv[i], "c:"):
			cost = addSat(cost, v)
		}
	}
	return tokens, cost, nil
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// Totals is a tenant's period as Redis holds it.
type Totals struct {
	// Tokens and Cost are the fleet's totals; Processes counts the
	// processes that contributed.
	Tokens    int64
	Cost      spend.Amount
	Processes int
}

// Totals reads a tenant's period, for dashboards and tests.
func (s *Store) Totals(ctx context.Context, tenant string, p spend.Period, id int64) (Totals, error) {
	kv, err := s.client.HGetAll(ctx, s.Key(tenant, p, id)).Result()
	if err != nil {
		return Totals{}, fmt.Errorf("redisspend: reading totals: %w", err)
	}
	flat := make([]string, 0, 2*len(kv))
	procs := 0
	for k, v := range kv {
		flat = append(flat, k, v)
		if strings.HasPrefix(k, "t:") {
			procs++
		}
	}
	tok, cost, err := sum(flat)
	if err != nil {
		return Totals{}, fmt.Errorf("redisspend: reading totals: %w", err)
	}
	return Totals{Tokens: tok, Cost: spend.Amount(cost), Processes: procs}, nil
}
