package redisspend

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode"

	"github.com/redis/go-redis/v9"

	"github.com/tierguard/tierguard/fallback/spend"
)

// Defaults applied to zero fields of Options.
const (
	DefaultPrefix       = "tierguard:spend:"
	DefaultKeepAfterEnd = 48 * time.Hour
	DefaultLease        = 10 * time.Minute
)

// podWindow is how recently a process must have exchanged with Redis to
// count among the pods (Options.Pods 0).
const podWindow = 30 * time.Second

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

	// Strict makes the fleet's limits strict (spend.StrictStore): the
	// ledger reserves every request's estimate in Redis before it admits
	// it, one round trip, and its end releases the reservation. See the
	// package documentation.
	Strict bool
	// Lease is how long a reservation outlives a process that dies
	// before its request ends: Redis frees it then. It must exceed the
	// longest request. DefaultLease when zero.
	Lease time.Duration
	// Pods is how many processes share the limits, for the share each
	// may spend while Redis is away. 0 counts the processes that
	// exchanged with Redis in the last 30 s.
	Pods int
}

// Store shares spend limits through Redis; see the package documentation.
// It starts no goroutine and holds no connection of its own: the client
// stays the caller's. One Store serves one spend.Ledger.
type Store struct {
	client redis.UniversalClient
	prefix string
	proc   string
	keep   time.Duration
	strict bool
	lease  time.Duration
	// pods is Options.Pods, or else the processes Redis last counted.
	fixedPods int
	pods      atomic.Int64
}

var (
	_ spend.StrictStore = (*Store)(nil)
	_ spend.PodCounter  = (*Store)(nil)
	_ spend.Claimer     = (*Store)(nil)
)

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
	if opts.Lease < 0 || opts.Lease > 0 && opts.Lease < time.Millisecond {
		bad("Lease must be at least 1ms, got %v", opts.Lease)
	}
	if opts.Pods < 0 {
		bad("Pods must not be negative, got %d", opts.Pods)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("redisspend: invalid options: %w", err)
	}
	keep := opts.KeepAfterEnd
	if keep == 0 {
		keep = DefaultKeepAfterEnd
	}
	st := &Store{client: client, prefix: prefix, proc: proc, keep: keep, strict: opts.Strict,
		lease: cmp.Or(opts.Lease, DefaultLease), fixedPods: opts.Pods}
	st.pods.Store(int64(opts.Pods))
	return st, nil
}

// Strict implements spend.StrictStore: Options.Strict.
func (s *Store) Strict() bool { return s.strict }

// Pods implements spend.PodCounter: Options.Pods, or the processes that
// exchanged with Redis in the last 30 s as of this store's last
// exchange (0 before it).
func (s *Store) Pods() int { return int(s.pods.Load()) }

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

// reservations is the key of a period's reservations (a sorted set of
// "<process>:<number>:<tokens>:<cost>" by expiry, Redis's Unix ms), in
// the period hash's slot.
func reservations(period string) string { return period + ":r" }

// sweep is the Lua that frees the reservations whose lease ended: their
// estimates leave the hash's reserved totals (fields r:t and r:c, kept
// with HINCRBY, exact in int64).
const sweep = `
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function unreserve(h, tok, cost)
  if tok ~= '0' then redis.call('HINCRBY', h, 'r:t', '-' .. tok) end
  if cost ~= '0' then redis.call('HINCRBY', h, 'r:c', '-' .. cost) end
end
local function sweep(h, z, now)
  local gone = redis.call('ZRANGEBYSCORE', z, '-inf', now, 'LIMIT', 0, 256)
  for _, m in ipairs(gone) do
    local tok, cost = string.match(m, ':(%d+):(%d+)$')
    redis.call('ZREM', z, m)
    if tok then unreserve(h, tok, cost) end
  end
end
`

// syncScript keeps, for this process, the larger of the stored and the
// sent cumulative figures, drops the reservations released, sets the
// keys' expiry and returns every field of the hash. The figures are
// compared as decimal strings (Lua's numbers are doubles, exact only to
// 2^53), and summed by the caller.
//
//	KEYS[1]  the period's hash, KEYS[2] its reservations
//	ARGV[1]  field of this process's tokens, ARGV[2] its value
//	ARGV[3]  field of this process's cost,   ARGV[4] its value
//	ARGV[5]  expiry, Unix ms
//	ARGV[6]  the lease, ms; ARGV[7] n, the reservations to make
//	ARGV[8…] n reservations made whatever the figures, then those
//	         released: member, tokens, cost each
var syncScript = redis.NewScript(sweep + `
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
local now = now_ms()
local made = 8 + 3 * tonumber(ARGV[7])
for i = 8, made - 1, 3 do
  if redis.call('ZADD', KEYS[2], 'NX', now + tonumber(ARGV[6]), ARGV[i]) == 1 then
    redis.call('HINCRBY', KEYS[1], 'r:t', ARGV[i + 1])
    redis.call('HINCRBY', KEYS[1], 'r:c', ARGV[i + 2])
  end
end
for i = made, #ARGV, 3 do
  if redis.call('ZREM', KEYS[2], ARGV[i]) == 1 then
    unreserve(KEYS[1], ARGV[i + 1], ARGV[i + 2])
  end
end
if redis.call('EXISTS', KEYS[2]) == 1 then
  sweep(KEYS[1], KEYS[2], now)
  redis.call('PEXPIREAT', KEYS[2], ARGV[5])
end
redis.call('PEXPIREAT', KEYS[1], ARGV[5])
return redis.call('HGETALL', KEYS[1])
`)

// reserveScript reserves an estimate in a day and its month when every
// limited meter leaves room for it: the processes' stored figures plus
// the reservations not released nor expired, plus the estimate, within
// the limit. It returns the refusing meter (-1 when granted) and, per
// period, the stored tokens and cost, the reserved tokens and cost, and
// this process's stored tokens and cost.
//
//	KEYS[1], KEYS[2]  the day's hash and reservations
//	KEYS[3], KEYS[4]  the month's
//	ARGV[1]  the member, ARGV[2] tokens, ARGV[3] cost, ARGV[4] lease ms
//	ARGV[5], ARGV[6]  the day's and the month's expiry, Unix ms
//	ARGV[7…10]  the limits: daily tokens, daily cost, monthly tokens,
//	            monthly cost (0 for none)
//	ARGV[11]  this process's name
//	ARGV[12…15]  the process's view of each meter's use, a floor to the
//	            stored figures
var reserveScript = redis.NewScript(sweep + `
local now = now_ms()
local proc = ARGV[11]
local function figures(h, z)
  sweep(h, z, now)
  local kv = redis.call('HGETALL', h)
  local f = {0, 0, 0, 0, 0, 0}
  for i = 1, #kv, 2 do
    local k, v = kv[i], tonumber(kv[i + 1]) or 0
    local p = string.sub(k, 1, 2)
    if p == 't:' then
      f[1] = f[1] + v
      if k == 't:' .. proc then f[5] = v end
    elseif p == 'c:' then
      f[2] = f[2] + v
      if k == 'c:' .. proc then f[6] = v end
    elseif k == 'r:t' then f[3] = v
    elseif k == 'r:c' then f[4] = v
    end
  end
  return f
end
local d = figures(KEYS[1], KEYS[2])
local m = figures(KEYS[3], KEYS[4])
local stored = {d[1], d[2], m[1], m[2]}
local held = {d[3], d[4], m[3], m[4]}
local used = {}
for i = 1, 4 do used[i] = math.max(stored[i], tonumber(ARGV[11 + i])) + held[i] end
local est = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[2]), tonumber(ARGV[3])}
local refused = -1
for i = 1, 4 do
  local limit = tonumber(ARGV[6 + i])
  if limit > 0 and (used[i] >= limit or used[i] + est[i] > limit) then
    refused = i - 1
    break
  end
end
if refused < 0 then
  local expiry = now + tonumber(ARGV[4])
  for i = 1, 3, 2 do
    local at = ARGV[5 + (i - 1) / 2]
    redis.call('ZADD', KEYS[i + 1], expiry, ARGV[1])
    redis.call('HINCRBY', KEYS[i], 'r:t', ARGV[2])
    redis.call('HINCRBY', KEYS[i], 'r:c', ARGV[3])
    redis.call('PEXPIREAT', KEYS[i], at)
    redis.call('PEXPIREAT', KEYS[i + 1], at)
  end
end
return {refused, d[1], d[2], d[3], d[4], d[5], d[6], m[1], m[2], m[3], m[4], m[5], m[6]}
`)

// podsScript counts this process among those exchanging with Redis and
// returns how many did in the last window.
//
//	KEYS[1]  the processes' sorted set, ARGV[1] this process, ARGV[2] the window ms
var podsScript = redis.NewScript(sweep + `
local now = now_ms()
redis.call('ZADD', KEYS[1], now, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[1], 2 * tonumber(ARGV[2]))
return redis.call('ZCARD', KEYS[1])
`)

// claimScript claims an event of a period for the first process that
// asks: it returns 1 to that one, every time it asks (a claim Redis made
// after its client gave up on the reply, then asked again, is still
// its), and 0 to the others.
//
//	KEYS[1]  the period's hash, ARGV[1] the event's field, ARGV[2] expiry,
//	Unix ms, ARGV[3] this process's name
var claimScript = redis.NewScript(`
local won = redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[3])
if won == 0 and redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[3] then won = 1 end
if redis.call('PTTL', KEYS[1]) < 0 then redis.call('PEXPIREAT', KEYS[1], ARGV[2]) end
return won
`)

// member names a reservation in the sorted set.
func (s *Store) member(r spend.Reserved) string {
	return s.proc + ":" + strconv.FormatUint(r.ID, 10) + ":" + strconv.FormatInt(max(r.Tokens, 0), 10) + ":" + strconv.FormatInt(max(int64(r.Cost), 0), 10)
}

// Reserve implements spend.StrictStore: one script, one round trip.
func (s *Store) Reserve(ctx context.Context, r *spend.Reservation) error {
	day, month := s.Key(r.Tenant, spend.Daily, r.Day), s.Key(r.Tenant, spend.Monthly, r.Month)
	args := []any{s.member(r.Reserved), max(r.Reserved.Tokens, 0), max(int64(r.Reserved.Cost), 0), s.lease.Milliseconds(),
		r.DayEnd.Add(s.keep).UnixMilli(), r.MonthEnd.Add(s.keep).UnixMilli(),
		r.Limits[spend.DailyTokens], r.Limits[spend.DailyCost], r.Limits[spend.MonthlyTokens], r.Limits[spend.MonthlyCost], s.proc,
		max(r.Floor[spend.DailyTokens], 0), max(r.Floor[spend.DailyCost], 0), max(r.Floor[spend.MonthlyTokens], 0), max(r.Floor[spend.MonthlyCost], 0)}
	vals, err := reserveScript.Run(ctx, s.client, []string{day, reservations(day), month, reservations(month)}, args...).Int64Slice()
	if err != nil {
		return fmt.Errorf("redisspend: reserve: %w", err)
	}
	if len(vals) != 13 {
		return fmt.Errorf("redisspend: reserve: %d values in the reply", len(vals))
	}
	r.Granted, r.Meter = vals[0] < 0, spend.Meter(max(vals[0], 0))
	for i, ms := range [2][2]spend.Meter{{spend.DailyTokens, spend.DailyCost}, {spend.MonthlyTokens, spend.MonthlyCost}} {
		f := vals[1+6*i : 7+6*i]
		r.Fleet[ms[0]], r.Fleet[ms[1]] = f[0], f[1]
		r.FleetReserved[ms[0]], r.FleetReserved[ms[1]] = f[2], f[3]
		r.Mine[ms[0]], r.Mine[ms[1]] = f[4], f[5]
	}
	return nil
}

// Claim implements spend.Claimer: one pipeline.
func (s *Store) Claim(ctx context.Context, claims []spend.Claim) error {
	cmds := make([]*redis.Cmd, len(claims))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range claims {
			c := &claims[i]
			// EVAL, not EVALSHA: a pipeline cannot fall back on a
			// script Redis lost, and this one is short.
			cmds[i] = claimScript.Eval(ctx, p, []string{s.Key(c.Tenant, c.Period, c.ID)}, "e:"+c.Event, c.End.Add(s.keep).UnixMilli(), s.proc)
		}
		return nil
	})
	var failed error
	for i, c := range cmds {
		won, cerr := c.Int64()
		if cerr != nil {
			failed = cmp.Or(failed, cerr)
			continue
		}
		claims[i].Claimed, claims[i].Won = true, won == 1
	}
	if err = cmp.Or(err, failed); err != nil {
		return fmt.Errorf("redisspend: claim: %w", err)
	}
	return nil
}

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
	var pods *redis.Cmd
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i := range shares {
			sh := &shares[i]
			expire := sh.End.Add(s.keep).UnixMilli()
			key := s.Key(sh.Tenant, sh.Period, sh.ID)
			args := make([]any, 0, 7+3*(len(sh.Admitted)+len(sh.Release)))
			args = append(args, ft, strconv.FormatInt(max(sh.Tokens, 0), 10), fc, strconv.FormatInt(max(int64(sh.Cost), 0), 10), expire,
				s.lease.Milliseconds(), len(sh.Admitted))
			for _, r := range sh.Admitted {
				args = append(args, s.member(r), max(r.Tokens, 0), max(int64(r.Cost), 0))
			}
			for _, r := range sh.Release {
				args = append(args, s.member(r), max(r.Tokens, 0), max(int64(r.Cost), 0))
			}
			cmds[i] = syncScript.EvalSha(ctx, p, []string{key, reservations(key)}, args...)
		}
		if s.fixedPods == 0 {
			pods = podsScript.EvalSha(ctx, p, []string{s.prefix + "pods"}, s.proc, podWindow.Milliseconds())
		}
		return nil
	})
	if err != nil && reload && redis.HasErrorPrefix(err, "NOSCRIPT") {
		// Redis lost its script cache (a restart, SCRIPT FLUSH): load
		// the scripts and send the batch again, once; the writes are
		// idempotent, and so are the releases.
		for _, sc := range []*redis.Script{syncScript, podsScript} {
			if lerr := sc.Load(ctx, s.client).Err(); lerr != nil {
				return fmt.Errorf("redisspend: loading the script: %w", lerr)
			}
		}
		return s.sync(ctx, shares, false)
	}
	if pods != nil {
		if n, perr := pods.Int64(); perr == nil {
			s.pods.Store(n)
		}
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
		f, perr := sum(vals)
		if perr != nil {
			failed = perr
			continue
		}
		sh.FleetTokens, sh.FleetCost, sh.Synced = f.tokens, spend.Amount(f.cost), true
		sh.FleetReserved.Tokens, sh.FleetReserved.Cost = f.reservedTokens, spend.Amount(f.reservedCost)
	}
	if err == nil {
		err = failed
	}
	if err != nil {
		return fmt.Errorf("redisspend: sync: %w", err)
	}
	return nil
}

// figures are a period's, as its hash holds them.
type figures struct {
	// tokens and cost are the processes' sums; reservedTokens and
	// reservedCost the estimates reserved and not released.
	tokens, cost, reservedTokens, reservedCost int64
}

// sum adds the processes' figures of an HGETALL reply, saturating, and
// reads the reserved totals; other fields (claims) are left alone.
func sum(kv []string) (figures, error) {
	var f figures
	for i := 0; i+1 < len(kv); i += 2 {
		k := kv[i]
		var into *int64
		switch {
		case strings.HasPrefix(k, "t:"):
			into = &f.tokens
		case strings.HasPrefix(k, "c:"):
			into = &f.cost
		case k == "r:t":
			into = &f.reservedTokens
		case k == "r:c":
			into = &f.reservedCost
		default:
			continue
		}
		v, perr := strconv.ParseInt(kv[i+1], 10, 64)
		if perr != nil || v < 0 {
			return figures{}, fmt.Errorf("field %q holds %q", k, kv[i+1])
		}
		*into = addSat(*into, v)
	}
	return f, nil
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
	// ReservedTokens and ReservedCost are the estimates of requests in
	// flight that strict stores reserved (Options.Strict).
	ReservedTokens int64
	ReservedCost   spend.Amount
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
	f, err := sum(flat)
	if err != nil {
		return Totals{}, fmt.Errorf("redisspend: reading totals: %w", err)
	}
	return Totals{Tokens: f.tokens, Cost: spend.Amount(f.cost), ReservedTokens: f.reservedTokens, ReservedCost: spend.Amount(f.reservedCost), Processes: procs}, nil
}
