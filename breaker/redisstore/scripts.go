package redisstore

import "github.com/redis/go-redis/v9"

// The Lua scripts below are the only writers of a breaker's keys; each runs
// atomically in Redis. Times are Redis's own clock (TIME), in milliseconds,
// so that the clocks of the processes never have to agree: a process sends
// durations (the rest of its cooldown) and receives durations (the rest of
// the shared cooldown), never instants.
//
// Keys of one breaker (all in one cluster hash slot thanks to the {id} tag);
// proposeScript and recordScript take KEYS[1] and KEYS[2], acquireScript
// the state and the probes:
//
//	KEYS[1]  <prefix>{<id>}:state   hash  s = state (0 closed, 1 half-open, 2 open)
//	                                      g = generation, u = open until (ms, Redis clock)
//	KEYS[2]  <prefix>{<id>}:win     hash  t<period> = calls, f<period> = failures
//	KEYS[3]  <prefix>{<id>}:probes  zset  probe lease id -> lease end (ms)
//
// An absent state key means closed at generation 0. A generation is
// max(previous + 1, now in ms), so it keeps growing even when the key
// expired or Redis restarted empty.

// luaPrelude reads the clock and the state, and defines write, which
// installs a new state, clears the window and publishes the change. Probe
// leases are not cleared: their holders return them (or they expire), so a
// lease taken just before the fleet moved to half-open still counts.
const luaPrelude = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'g', 'u')
local s = tonumber(cur[1]) or 0
local g = tonumber(cur[2]) or 0
local u = tonumber(cur[3]) or 0
local rem = 0
if s == 2 and u > now then rem = u - now end
local function write(to, openms, ttl, channel, id, origin)
  local ng = math.max(g + 1, now)
  local untl = 0
  local r = 0
  if to == 2 then
    r = math.max(openms, 0)
    untl = now + r
  end
  redis.call('HSET', KEYS[1], 's', to, 'g', ng, 'u', untl)
  redis.call('PEXPIRE', KEYS[1], ttl + r)
  redis.call('DEL', KEYS[2])
  redis.call('PUBLISH', channel, string.format('v1 %s %d %.0f %.0f %s', id, to, ng, r, origin))
  return {1, to, ng, r}
end
`

// proposeScript offers a local transition to the fleet.
//
// ARGV: 1 kind (o open, h half-open, c closed, r reset), 2 base generation
// (the shared generation the proposer last knew), 3 open duration ms, 4
// state TTL ms, 5 slack ms, 6 channel, 7 id, 8 origin.
//
// A proposal made from an out-of-date view (base differs from the shared
// generation) is refused, except a reset. Open is accepted from closed or
// half-open; half-open only from an open state whose cooldown has ended
// (within the slack); closed only from half-open (or an ended open). A
// proposal that matches the shared state is agreed without a write.
//
// Returns {accepted 0|1, state, generation, open ms remaining}.
var proposeScript = redis.NewScript(luaPrelude + `
local kind = ARGV[1]
local base = tonumber(ARGV[2])
local slack = tonumber(ARGV[5])
local to = -1
if kind == 'r' then
  to = 0
elseif g == 0 or base == g then
  if kind == 'o' then
    if s == 2 then return {1, s, g, rem} end
    to = 2
  elseif kind == 'h' then
    if s == 1 then return {1, s, g, rem} end
    if g == 0 or (s == 2 and u <= now + slack) then to = 1 end
  elseif kind == 'c' then
    if s == 0 then return {1, s, g, rem} end
    if s == 1 or u <= now + slack then to = 0 end
  end
end
if to < 0 then return {0, s, g, rem} end
return write(to, tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[6], ARGV[7], ARGV[8])
`)

// recordScript adds a batch of counted outcomes to the fleet's rolling
// window and trips the fleet when its thresholds are met while closed.
//
// ARGV: 1 calls, 2 failures, 3 bucket width ms, 4 buckets, 5 failure ratio,
// 6 min calls, 7 failure count, 8 cooldown ms, 9 state TTL ms, 10 channel,
// 11 id.
//
// Returns {tripped 0|1, state, generation, open ms remaining, calls,
// failures}.
var recordScript = redis.NewScript(luaPrelude + `
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
if s ~= 0 then return {0, s, g, rem, calls, fails} end
local ratio = tonumber(ARGV[5])
local count = tonumber(ARGV[7])
local trip = (count > 0 and fails >= count) or
  (ratio > 0 and calls >= tonumber(ARGV[6]) and fails >= ratio * calls)
if not trip then return {0, s, g, rem, calls, fails} end
local r = write(2, tonumber(ARGV[8]), tonumber(ARGV[9]), ARGV[10], ARGV[11], '-')
r[5] = calls
r[6] = fails
return r
`)

// acquireScript takes a fleet-wide probe lease.
//
// KEYS: 1 state, 2 probes. ARGV: 1 limit, 2 lease ms, 3 lease id, 4 slack
// ms. Returns 1 when the lease was taken, 0 when the fleet's probes are all
// in flight or the shared breaker is open with more than the slack left.
var acquireScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'u')
if tonumber(cur[1]) == 2 and (tonumber(cur[2]) or 0) > now + tonumber(ARGV[4]) then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
if redis.call('ZCARD', KEYS[2]) >= tonumber(ARGV[1]) then return 0 end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[2]))
return 1
`)

// readScript reads the shared state. KEYS: 1 state.
// Returns {state, generation, open ms remaining}.
var readScript = redis.NewScript(`
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local cur = redis.call('HMGET', KEYS[1], 's', 'g', 'u')
local s = tonumber(cur[1]) or 0
local u = tonumber(cur[3]) or 0
local rem = 0
if s == 2 and u > now then rem = u - now end
return {s, tonumber(cur[2]) or 0, rem}
`)
