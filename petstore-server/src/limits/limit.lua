-- One request's rate-limit decision, decided and charged atomically in
-- Redis: the core's KeyLimiter::check (petstore-core/src/limiter.rs) and
-- AnonymousLimiter::check, number for number (tests/redis_limits.rs runs
-- both on the same random steps and compares every field).
--
-- KEYS[1]  the state: a hash, `{<sha256 hex>}:m<perMinute>/d<perDay>` for a
--          key, `{anon:<address>}:m<perMinute>` for a client address.
-- ARGV[1]  now in whole milliseconds since the Unix epoch, or "" (always,
--          in production) for Redis TIME: one clock for every replica.
-- ARGV[2]  per minute; ARGV[3] per day, "0" for none (anonymous).
-- ARGV[4]  strikes that earn a ban, "0" for no bans (anonymous);
-- ARGV[5]  the strikes' window, ms; ARGV[6] the ban's length, ms.
--
-- Returns 12 integers: outcome (0 allowed, 1 limited, 2 banned), now (ms),
-- ban started (0/1), then per window (minute, day) its remaining, the
-- instant it is full again as ms and a fraction (numerator over the
-- capacity) and, when refused by it, its wait as a numerator (ms times
-- 1/capacity); then when the ban ends (ms, 0 for none).
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
-- (the core's Bucket::judge; all quantities in units of 1 ms / cap). Returns
-- allowed, remaining, the TAT seen (max of the stored one and now), the TAT
-- to store if the request goes ahead, and the wait (0 when allowed).
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
  local b = { tms = ms, tfrac = frac, nms = ms, nfrac = frac, wait = 0 }
  b.allowed = debt + period <= span
  local used = debt
  if b.allowed then
    used = debt + period
    local f = frac + period
    local carry = idiv(f, cap)
    b.nms = ms + carry
    b.nfrac = f - carry * cap
  else
    b.wait = debt + period - span
  end
  b.remaining = idiv(span - used, period)
  return b
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
local key = KEYS[1]

local st = redis.call('HMGET', key, 'mm', 'mf', 'dm', 'df', 'bu', 'ra', 'r')
local m = judge(tonumber(st[1]) or 0, tonumber(st[2]) or 0, mcap, MINUTE, now)
local d = { allowed = true, remaining = 0, tms = 0, tfrac = 0, nms = 0, nfrac = 0, wait = 0 }
if dcap > 0 then
  d = judge(tonumber(st[3]) or 0, tonumber(st[4]) or 0, dcap, DAY, now)
end
local banned_until = tonumber(st[5])
local retry_at = tonumber(st[6])

local function int(x)
  return string.format('%d', x)
end

local outcome = 1
local started = 0
local wrote = false
local refusals_text = st[7] or ''
if banned_until and now < banned_until then
  outcome = 2
elseif m.allowed and d.allowed then
  outcome = 0
  redis.call('HSET', key, 'mm', int(m.nms), 'mf', int(m.nfrac), 'dm', int(d.nms), 'df', int(d.nfrac))
  wrote = true
elseif strikes > 0 then
  -- The core's KeyLimiter::check: only a refusal that came back before
  -- the previous refusal's Retry-After is a strike.
  local secs = 0
  if not m.allowed then
    secs = wait_secs(m.wait, mcap)
  end
  if not d.allowed then
    secs = math.max(secs, wait_secs(d.wait, dcap))
  end
  local ignored = retry_at and now < retry_at
  retry_at = now + secs * 1000
  local fields = { 'ra', int(retry_at) }
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
      fields[#fields + 1] = 'bu'
      fields[#fields + 1] = int(banned_until)
    else
      refusals[#refusals + 1] = int(now)
    end
    refusals_text = table.concat(refusals, ',')
    fields[#fields + 1] = 'r'
    fields[#fields + 1] = refusals_text
  end
  redis.call('HSET', key, unpack(fields))
  wrote = true
end

-- A TTL on every write, outliving every field of the state: the buckets
-- full again, the ban over, the Retry-After passed, the last strike out
-- of its window. Past that, a missing key is exactly a fresh limiter.
if wrote then
  local keep = math.max(m.tms, d.tms, retry_at or 0, banned_until or 0)
  if outcome == 0 then
    keep = math.max(keep, m.nms + 1, d.nms + 1)
  end
  local last = string.match(refusals_text, '(%d+)$')
  if last then
    keep = math.max(keep, tonumber(last) + window)
  end
  redis.call('PEXPIRE', key, int(keep - now + 1000))
end

local function window_reply(b)
  local remaining = 0
  local fms, ffrac = b.tms, b.tfrac
  if outcome == 0 then
    remaining = b.remaining
    fms, ffrac = b.nms, b.nfrac
  elseif outcome == 1 then
    remaining = b.remaining
    if b.allowed then
      remaining = remaining + 1
    end
  end
  return remaining, fms, ffrac, b.wait
end

local mr, mfms, mffrac, mwait = window_reply(m)
local dr, dfms, dffrac, dwait = window_reply(d)
local until_ms = 0
if outcome == 2 then
  until_ms = banned_until
end
return { outcome, now, started, mr, mfms, mffrac, mwait, dr, dfms, dffrac, dwait, until_ms }
