-- The rate-limit decisions of COUNT requests of one limiter state,
-- decided and charged atomically in Redis, one after the other at the
-- same instant: the core's KeyLimiter::check (petstore-core/src/limiter.rs)
-- and AnonymousLimiter::check, number for number, called COUNT times
-- (tests/ratelimit_redis_script.rs runs both on the same random steps and compares
-- every field).
--
-- Why several requests in one call: Redis runs scripts on one thread, and
-- a call's fixed costs (the script's start, TIME, reading and writing the
-- state, the reply) are most of its cost. The server sends one call per
-- state at a time and the requests of that state that arrive meanwhile
-- ride together in the next (redis.rs, "Batches"); a lone request is a
-- call of COUNT 1. One state only per call: a key's entries share one
-- Redis Cluster slot, different keys need not.
--
-- KEYS[1]  the state: a hash, `{<sha256 hex>}:m<perMinute>/d<perDay>` for a
--          key, `{anon:<address>}:m<perMinute>` for a client address.
-- ARGV[1]  now in whole milliseconds since the Unix epoch, or "" (always,
--          in production) for Redis TIME: one clock for every replica.
-- ARGV[2]  per minute; ARGV[3] per day, "0" for none (anonymous).
-- ARGV[4]  strikes that earn a ban, "0" for no bans (anonymous);
-- ARGV[5]  the strikes' window, ms; ARGV[6] the ban's length, ms.
-- ARGV[7]  COUNT, the number of requests (absent: 1), at most 1000.
--
-- Returns 12 integers per request, in order: outcome (0 allowed, 1
-- limited, 2 banned), now (ms), ban started (0/1), then per window
-- (minute, day) its remaining, the instant it is full again as ms and a
-- fraction (numerator over the capacity) and, when refused by it, its
-- wait as a numerator (ms times 1/capacity); then when the ban ends (ms,
-- 0 for none).
--
-- Exact arithmetic in doubles: Lua numbers are doubles, exact for
-- integers below 2^53. A bucket's theoretical arrival time (TAT) is kept
-- as whole ms plus a fraction `frac/cap` (0 <= frac < cap), never as one
-- scaled number (ms times the capacity would pass 2^53). The largest
-- intermediate is `debt + period`, at most period * (cap + 1): for the day
-- (86,400,000 ms) and the bound on a quota, 100,000,000 (keys.rs), that is
-- 8.64e15 < 2^53 = 9.007e15.

local MINUTE = 60000
local DAY = 86400000

-- floor(a / b) for integers 0 <= a < 2^53, b > 0: the quotient of doubles
-- may round up across an integer; the remainder corrects it.
local function idiv(a, b)
  local q = math.floor(a / b)
  local r = a - q * b
  if r < 0 then
    q = q - 1
  elseif r >= b then
    q = q + 1
  end
  return q
end

-- Judges one request at `now` against the bucket whose TAT is ms + frac/cap
-- (the core's Bucket::judge; all quantities in units of 1 ms / cap).
-- Returns whether it is allowed, the remaining, the TAT seen (max of the
-- stored one and now, as ms and frac), the TAT to store if the request
-- goes ahead (ms, frac), and the wait (0 when allowed). Plain values, no
-- table: this runs once per request and window.
local function judge(ms, frac, cap, period, now)
  if ms < now then
    ms = now
    frac = 0
  end
  local span = period * cap
  local debt
  if ms - now >= period then
    debt = span
  else
    debt = (ms - now) * cap + frac
    if debt > span then
      debt = span
    end
  end
  if debt + period <= span then
    local f = frac + period
    local carry = idiv(f, cap)
    return true, idiv(span - debt - period, period), ms, frac, ms + carry, f - carry * cap, 0
  end
  return false, idiv(span - debt, period), ms, frac, ms, frac, debt + period - span
end

-- Whole seconds of a wait as Retry-After states it: the wait is
-- wait/cap ms, rounded up to a second, at least 1.
local function wait_secs(wait, cap)
  local d = cap * 1000
  local s = idiv(wait + d - 1, d)
  if s < 1 then
    s = 1
  end
  return s
end

local function int(x)
  return string.format('%d', x)
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + idiv(tonumber(t[2]), 1000)
else
  now = tonumber(ARGV[1])
end
local mcap = tonumber(ARGV[2])
local dcap = tonumber(ARGV[3])
local strikes = tonumber(ARGV[4])
local window = tonumber(ARGV[5])
local ban = tonumber(ARGV[6])
local count = tonumber(ARGV[7] or '1')
local key = KEYS[1]
if not count or count < 1 or count > 1000 then
  return redis.error_reply('COUNT must be 1 to 1000')
end

-- The state, read once and written once for all COUNT requests.
local st = redis.call('HMGET', key, 'mm', 'mf', 'dm', 'df', 'bu', 'ra', 'r')
local mm, mf = tonumber(st[1]) or 0, tonumber(st[2]) or 0
local dm, df = tonumber(st[3]) or 0, tonumber(st[4]) or 0
local banned_until = tonumber(st[5])
local retry_at = tonumber(st[6])
local refusals_text = st[7] or ''
local charged, struck = false, false

-- One window's reply fields for a request with this outcome: a request
-- that went ahead reports the bucket after it; a refused one the bucket
-- as it stands, a window that would have let it through counting the
-- token it did not take; a banned one nothing remaining.
local function window_reply(outcome, allowed, remaining, tms, tfrac, nms, nfrac)
  if outcome == 0 then
    return remaining, nms, nfrac
  elseif outcome == 1 then
    if allowed then
      remaining = remaining + 1
    end
    return remaining, tms, tfrac
  end
  return 0, tms, tfrac
end

local out = {}
for _ = 1, count do
  local ma, mr, mtms, mtfrac, mnms, mnfrac, mwait = judge(mm, mf, mcap, MINUTE, now)
  local da, dr, dtms, dtfrac, dnms, dnfrac, dwait = true, 0, 0, 0, 0, 0, 0
  if dcap > 0 then
    da, dr, dtms, dtfrac, dnms, dnfrac, dwait = judge(dm, df, dcap, DAY, now)
  end
  local outcome = 1
  local started = 0
  if banned_until and now < banned_until then
    outcome = 2
  elseif ma and da then
    outcome = 0
    mm, mf, dm, df = mnms, mnfrac, dnms, dnfrac
    charged = true
  elseif strikes > 0 then
    -- The core's KeyLimiter::check: only a refusal that came back before
    -- the previous refusal's Retry-After is a strike.
    local secs = 0
    if not ma then
      secs = wait_secs(mwait, mcap)
    end
    if not da then
      secs = math.max(secs, wait_secs(dwait, dcap))
    end
    local ignored = retry_at and now < retry_at
    retry_at = now + secs * 1000
    struck = true
    if ignored then
      local refusals = {}
      for t in string.gmatch(refusals_text, '%d+') do
        local at = tonumber(t)
        if window <= now - at then
          -- out of the window: forgotten
        else
          refusals[#refusals + 1] = t
        end
      end
      if strikes <= #refusals + 1 then
        refusals = {}
        banned_until = now + ban
        outcome = 2
        started = 1
      else
        refusals[#refusals + 1] = int(now)
      end
      refusals_text = table.concat(refusals, ',')
    end
  end
  local n = #out
  out[n + 1] = outcome
  out[n + 2] = now
  out[n + 3] = started
  out[n + 4], out[n + 5], out[n + 6] = window_reply(outcome, ma, mr, mtms, mtfrac, mnms, mnfrac)
  out[n + 7] = mwait
  out[n + 8], out[n + 9], out[n + 10] = window_reply(outcome, da, dr, dtms, dtfrac, dnms, dnfrac)
  out[n + 11] = dwait
  if outcome == 2 then
    out[n + 12] = banned_until
  else
    out[n + 12] = 0
  end
end

-- One write for the whole batch: the buckets if a request went ahead, the
-- strike fields if one was refused; a ban starts only on a refusal.
if charged or struck then
  local fields = {}
  if charged then
    fields = { 'mm', int(mm), 'mf', int(mf), 'dm', int(dm), 'df', int(df) }
  end
  if struck then
    fields[#fields + 1] = 'ra'
    fields[#fields + 1] = int(retry_at)
    fields[#fields + 1] = 'r'
    fields[#fields + 1] = refusals_text
    if banned_until then
      fields[#fields + 1] = 'bu'
      fields[#fields + 1] = int(banned_until)
    end
  end
  redis.call('HSET', key, unpack(fields))
  -- A TTL on every write, outliving every field of the state: the
  -- buckets full again, the ban over, the Retry-After passed, the last
  -- strike out of its window. Past that, a missing key is exactly a
  -- fresh limiter.
  local keep = math.max(mm + 1, dm + 1, retry_at or 0, banned_until or 0)
  local last = string.match(refusals_text, '(%d+)$')
  if last then
    keep = math.max(keep, tonumber(last) + window)
  end
  redis.call('PEXPIRE', key, int(keep - now + 1000))
end

return out
