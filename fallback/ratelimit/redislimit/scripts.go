package redislimit

import "github.com/redis/go-redis/v9"

// The limit's state in Redis is two numbers, one per bucket, each the
// generic cell rate algorithm's theoretical arrival time: the instant, in
// microseconds of Redis's own clock (TIME), at which the bucket is full
// again. Every process reads Redis's clock through the scripts, so the
// fleet agrees on time whatever its hosts' clocks say. Both keys of a limit
// share the {id} hash tag (one cluster slot):
//
//	KEYS[1]  <prefix>{<id>}:r  the requests bucket's arrival time (µs)
//	KEYS[2]  <prefix>{<id>}:t  the tokens bucket's arrival time (µs)
//	KEYS[3]  <prefix>{<id>}:p  sorted set: the processes that took turns,
//	                           by random store token, and when (µs)
//
// A bucket holds (window − max(0, tat − now)) / interval units at now. An
// absent key is a full bucket. Keys expire a window after their arrival
// time: a limit nobody uses leaves nothing behind.
//
// Lua's numbers are doubles, exact for whole microseconds below 2^53 (285
// years). An arrival time is stored rounded up to a whole microsecond, so
// that a cost of a fraction of one (a rate above a unit a microsecond) is
// never rounded away; Join keeps windows within an int64 of nanoseconds,
// as the local bucket does; and every figure handed to Redis as an
// integer (an expiry, a wait) is written whole and kept in its range.

// takeScript grants up to want units of each bucket, and at least need of
// each, atomically: either both buckets grant at least what is needed, or
// neither changes.
//
// ARGV: 1 requests interval µs, 2 requests window µs, 3 requests wanted,
// 4 requests needed, 5 tokens interval µs, 6 tokens window µs, 7 tokens
// wanted, 8 tokens needed, 9 the process's token, 10 presence µs. An
// interval of 0 means no such limit. The process is noted among those
// that took turns; those that have not for presence are forgotten.
//
// Returns {1, requests granted, tokens granted, processes} or {0, retry
// in µs, processes}: processes is how many took turns within presence.
var takeScript = redis.NewScript(luaClock + `
local presence = tonumber(ARGV[10])
redis.call('ZADD', KEYS[3], now, ARGV[9])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now - presence)
redis.call('PEXPIRE', KEYS[3], math.ceil(presence / 1000))
local pods = redis.call('ZCARD', KEYS[3])
local function avail(key, interval, window)
  local tat = tonumber(redis.call('GET', key)) or 0
  local base = math.max(tat, now)
  return math.floor((window - (base - now)) / interval), base
end
local grant = {0, 0}
local bases = {0, 0}
local wait = 0
for i = 0, 1 do
  local interval = tonumber(ARGV[1 + 4*i])
  if interval > 0 then
    local window = tonumber(ARGV[2 + 4*i])
    local want = tonumber(ARGV[3 + 4*i])
    local need = tonumber(ARGV[4 + 4*i])
    local n, base = avail(KEYS[1 + i], interval, window)
    bases[i + 1] = base
    if n < need then
      wait = math.max(wait, base + need * interval - window - now)
    else
      grant[i + 1] = math.max(math.min(want, n), need)
    end
  end
end
if wait > 0 then return {0, int(wait), pods} end
for i = 0, 1 do
  local interval = tonumber(ARGV[1 + 4*i])
  if interval > 0 and grant[i + 1] > 0 then
    store(KEYS[1 + i], bases[i + 1] + grant[i + 1] * interval, tonumber(ARGV[2 + 4*i]))
  end
end
return {1, grant[1], grant[2], pods}
`)

// adjustScript takes n more tokens (n > 0), going into debt, or gives −n
// back (n < 0), never above the burst.
//
// ARGV: 1 tokens interval µs, 2 tokens window µs, 3 n.
var adjustScript = redis.NewScript(luaClock + `
local interval = tonumber(ARGV[1])
local n = tonumber(ARGV[3])
local tat = tonumber(redis.call('GET', KEYS[1])) or 0
local next
if n > 0 then
  next = math.max(tat, now) + n * interval
else
  next = math.max(tat + n * interval, now)
  if math.ceil(next) >= tat then return 0 end
end
store(KEYS[1], next, tonumber(ARGV[2]))
return 1
`)

// holdScript empties the requests bucket until d from now, after an
// upstream 429: the fleet's next call comes back then.
//
// ARGV: 1 requests interval µs, 2 requests window µs, 3 d µs.
var holdScript = redis.NewScript(luaClock + `
local next = now + tonumber(ARGV[3]) + tonumber(ARGV[2]) - tonumber(ARGV[1])
local tat = tonumber(redis.call('GET', KEYS[1])) or 0
if math.ceil(next) <= tat then return 0 end
store(KEYS[1], next, tonumber(ARGV[2]))
return 1
`)

// luaClock starts every script: now, Redis's clock in microseconds; int,
// a figure rounded up to an integer Redis can take (at most 2^53: 285
// years of microseconds, or 285,000 of milliseconds); and store, which
// sets a bucket's arrival time, rounded up to a whole microsecond, to
// expire a window after it. string.format writes a number whole, where
// redis.call's own conversion writes a large one with an exponent
// (5.5e+23), which SET refuses.
const luaClock = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local function int(x)
  return math.min(math.ceil(x), 2^53)
end
local function store(key, tat, window)
  tat = math.ceil(tat)
  redis.call('SET', key, string.format('%.0f', tat), 'PX', string.format('%.0f', int((tat - now + window) / 1000) + 1))
end
`
