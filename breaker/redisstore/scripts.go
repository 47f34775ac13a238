package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below are the only writers of a breaker's keys; each runs
// atomically in Redis. Times in the keys and in the arguments are Redis's
// own clock (TIME), in milliseconds. A process converts its monotonic clock
// to Redis's with the offset it measures on every reply (see offset), and
// every reply ends with Redis's clock in microseconds for that purpose.
// Replies and publications give times as durations from Redis's present
// (time left of a cooldown, age of a decision), which the receiver turns
// into instants of its own clock when it reads them.
//
// Keys of one breaker (all in one cluster hash slot thanks to the {id} tag);
// proposeScript and recordScript take KEYS[1] and KEYS[2], acquireScript
// the state and the probes:
//
//	KEYS[1]  <prefix>{<id>}:state   hash  s = state (0 closed, 1 half-open, 2 open)
//	                                      g = generation, u = open until (ms)
//	                                      t = when the state was decided (ms)
//	                                      r = when this chain of states began (ms)
//	KEYS[2]  <prefix>{<id>}:win     hash  t<period> = calls, f<period> = failures
//	KEYS[3]  <prefix>{<id>}:probes  zset  probe lease id -> lease end (ms)
//
// An absent state key means closed at generation 0, decided at time 0. A
// generation is max(previous + 1, now in ms), so it keeps growing even when
// the key expired or Redis restarted empty.
//
// A chain of states begins with the first write onto an absent state (r is
// the time of that write) and goes on through every accepted proposal. An
// absent state cannot tell a current proposal from one that was queued
// while Redis lost the state, nor can the states written through it: so a
// state is confirmed only if it was decided after its chain began (t >= r),
// by a process that could have seen the chain. A process keeps its own
// newer open or half-open state against an unconfirmed half-open or closed
// one (see member.sync). A state written by an older version of this
// package has no t, for which its generation (its write time) stands in,
// and no r: it counts as confirmed.
//
// Every write carries an expiry (ARGV "expires", ms): executed later than
// that, because Redis was paused or slow and the proposer has given up
// waiting, the script changes nothing and answers 2.

// luaPrelude reads the clock and the state, and defines reply and write:
// write installs a new state, clears the window and publishes the change.
// Probe leases are not cleared: their holders return them (or they expire),
// so a lease taken just before the fleet moved to half-open still counts.
const luaPrelude = `
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'g', 'u', 't', 'r')
local s = tonumber(cur[1]) or 0
local g = tonumber(cur[2]) or 0
local u = tonumber(cur[3]) or 0
local d = tonumber(cur[4]) or g
local root = tonumber(cur[5]) or 0
local v = 1
if g == 0 or d < root then v = 0 end
local rem = 0
if s == 2 and u > now then rem = u - now end
local function reply(code)
  return {code, s, g, rem, math.max(now - d, 0), v, nowus}
end
local function write(to, untl, decided, ttl, channel, id, origin)
  local ng = math.max(g + 1, now)
  local r = 0
  if to == 2 then
    r = math.max(untl - now, 0)
    untl = now + r
  else
    untl = 0
  end
  decided = math.min(decided, now)
  if g == 0 then root = now end
  local nv = 0
  if decided >= root then nv = 1 end
  redis.call('HSET', KEYS[1], 's', to, 'g', ng, 'u', untl, 't', decided, 'r', root)
  redis.call('PEXPIRE', KEYS[1], ttl + r)
  redis.call('DEL', KEYS[2])
  redis.call('PUBLISH', channel, string.format('v2 %s %d %.0f %.0f %.0f %d %s', id, to, ng, r, now - decided, nv, origin))
  return {1, to, ng, r, now - decided, nv, nowus}
end
`

// proposeScript offers a local transition to the fleet.
//
// ARGV: 1 kind (o open, h half-open, c closed, r reset), 2 base generation
// (the shared generation the proposer last knew), 3 open until (ms; for
// o), 4 decided (ms: when the proposer made the transition), 5 expires
// (ms), 6 state TTL ms, 7 slack ms, 8 channel, 9 id, 10 origin.
//
// An expired proposal changes nothing. A proposal made from an out-of-date
// view (base differs from the shared generation) is refused, except a
// reset, which is refused only when it was decided before the shared state
// was. Open is accepted from closed, half-open, or an open state whose
// cooldown has ended (within the slack); half-open only from an open state
// whose cooldown has ended (within the slack) or an absent state; closed
// only from half-open (or an ended open). A proposal that matches the
// shared state is agreed without a write (an open one only while the shared
// cooldown runs: the first trip's end stands).
//
// Returns {accepted 1 | refused 0 | expired 2, state, generation, open ms
// remaining, decision age ms, confirmed 1|0, Redis time µs}.
var proposeScript = redis.NewScript(luaPrelude + `
if now > tonumber(ARGV[5]) then return reply(2) end
local kind = ARGV[1]
local base = tonumber(ARGV[2])
local decided = tonumber(ARGV[4])
local slack = tonumber(ARGV[7])
local to = -1
if kind == 'r' then
  if decided >= d then to = 0 end
elseif g == 0 or base == g then
  if kind == 'o' then
    if s == 2 and u > now + slack then return reply(1) end
    to = 2
  elseif kind == 'h' then
    if s == 1 then return reply(1) end
    if g == 0 or (s == 2 and u <= now + slack) then to = 1 end
  elseif kind == 'c' then
    if s == 0 then return reply(1) end
    if s == 1 or u <= now + slack then to = 0 end
  end
end
if to < 0 then return reply(0) end
return write(to, tonumber(ARGV[3]), decided, tonumber(ARGV[6]), ARGV[8], ARGV[9], ARGV[10])
`)

// recordScript adds a batch of counted outcomes to the fleet's rolling
// window and trips the fleet when its thresholds are met while closed.
//
// ARGV: 1 calls, 2 failures, 3 bucket width ms, 4 buckets, 5 failure ratio,
// 6 min calls, 7 failure count, 8 cooldown ms, 9 state TTL ms, 10 channel,
// 11 id, 12 expires (ms).
//
// An expired batch is not counted. Returns {tripped 1 | not 0 | expired 2,
// state, generation, open ms remaining, decision age ms, confirmed 1|0,
// Redis time µs, calls, failures}.
var recordScript = redis.NewScript(luaPrelude + `
if now > tonumber(ARGV[12]) then
  local r = reply(2)
  r[8] = 0
  r[9] = 0
  return r
end
local width = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local p = math.floor(now / width)
if tonumber(ARGV[1]) > 0 then redis.call('HINCRBY', KEYS[2], 't' .. p, ARGV[1]) end
if tonumber(ARGV[2]) > 0 then redis.call('HINCRBY', KEYS[2], 'f' .. p, ARGV[2]) end
redis.call('PEXPIRE', KEYS[2], width * (n + 1))
local all = redis.call('HGETALL', KEYS[2])
local calls, fails = 0, 0
for i = 1, #all, 2 do
  local q = tonumber(string.sub(all[i], 2))
  if q == nil or q <= p - n then
    redis.call('HDEL', KEYS[2], all[i])
  elseif string.sub(all[i], 1, 1) == 't' then
    calls = calls + tonumber(all[i + 1])
  else
    fails = fails + tonumber(all[i + 1])
  end
end
local r
if s ~= 0 then
  r = reply(0)
else
  local ratio = tonumber(ARGV[5])
  local count = tonumber(ARGV[7])
  local trip = (count > 0 and fails >= count) or
    (ratio > 0 and calls >= tonumber(ARGV[6]) and fails >= ratio * calls)
  if trip then
    r = write(2, now + tonumber(ARGV[8]), now, tonumber(ARGV[9]), ARGV[10], ARGV[11], '-')
  else
    r = reply(0)
  end
end
r[8] = calls
r[9] = fails
return r
`)

// acquireScript takes a fleet-wide probe lease.
//
// KEYS: 1 state, 2 probes. ARGV: 1 limit, 2 lease ms, 3 lease id, 4 slack
// ms, 5 expires (ms: when the request stops waiting for the answer).
// Returns {1 taken | 0 refused | 2 expired, Redis time µs}: refused when
// the fleet's probes are all in flight or the shared breaker is open with
// more than the slack left. An expired request takes nothing, so that a
// request Redis answers too late holds no lease nobody will return.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
if now > tonumber(ARGV[5]) then return {2, nowus} end
local cur = redis.call('HMGET', KEYS[1], 's', 'u')
if tonumber(cur[1]) == 2 and (tonumber(cur[2]) or 0) > now + tonumber(ARGV[4]) then return {0, nowus} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[1]) then return {0, nowus} end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
return {1, nowus}
`)

// readScript reads the shared state. KEYS: 1 state.
// Returns {state, generation, open ms remaining, decision age ms,
// confirmed 1|0, Redis time µs}.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local nowus = tonumber(t[1]) * 1000000 + tonumber(t[2])
local now = math.floor(nowus / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'g', 'u', 't', 'r')
local s = tonumber(cur[1]) or 0
local g = tonumber(cur[2]) or 0
local u = tonumber(cur[3]) or 0
local d = tonumber(cur[4]) or g
local root = tonumber(cur[5]) or 0
local v = 1
if g == 0 or d < root then v = 0 end
local rem = 0
if s == 2 and u > now then rem = u - now end
return {s, g, rem, math.max(now - d, 0), v, nowus}
`)
