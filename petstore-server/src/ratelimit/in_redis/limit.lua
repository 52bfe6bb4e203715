-- The rate-limit decisions of the requests of one call: several limiter
-- states, each with its requests, decided and charged atomically in Redis
-- at one instant. For each state, the core's KeyLimiter::check
-- (petstore-core/src/limit/limiter.rs) or AnonymousLimiter::check, number for
-- number, called once per request (tests/ratelimit/redis_script.rs runs
-- both on the same random steps and compares every field).
--
-- Why many states per call: Redis runs scripts on one thread, and a
-- call's fixed costs (the script's start, TIME, the reply) are paid once
-- for everything the replica queued during its previous call (redis.rs,
-- "One flusher per shard"). Why one binary string per state: one GET and
-- one SET with PX cost Redis about half of HMGET, HSET and PEXPIRE, and
-- struct.unpack and struct.pack cost far less than parsing and printing
-- decimal text (strtod and sprintf were a third of the script's time);
-- the arguments are packed for the same reason. In a Redis Cluster every
-- state of one call lives in one hash slot (the server groups calls by
-- slot, and the states' names share a few hash tags: groups.rs), so no
-- call is CROSSSLOT.
--
-- KEYS         per state, in the order of ARGV's states, three names (or
--              the first alone when its FROM is "!"):
-- first        the state, stored in this script's form:
--              `{<sha256 hex>}:m<perMinute>/d<perDay>:v3` for a key,
--              `{anon:<address>}:m<perMinute>:v3` for a client address; in
--              a cluster, `{<group tag>}:<sha256 hex or anon:address>...`.
--              The same state may appear twice (a reload changed its ban
--              policy between two requests); it is decided in turn.
-- second       the same name with `:v2`: where the previous version kept
--              the state, as text (same hash tag). Read once, when the
--              state has no `:v3` form yet, and carried over; never written.
-- third        the same name without a suffix: where the version before
--              that kept it, as a hash. Read once, when the state has
--              neither form yet and its FROM is "", and carried over.
-- ARGV[1]      now in whole milliseconds since the Unix epoch, or "" (always,
--              in production) for Redis TIME: one clock for every replica.
-- ARGV[2..]    one argument per state, the states in the order of KEYS:
--              seven little-endian 64-bit integers packed (56 bytes): per
--              minute; per day (0 for none: anonymous); strikes that earn
--              a ban (0 for no bans: anonymous); the strikes' window, ms;
--              the ban's length, ms; COUNT, its requests in this call (0
--              to 1000); a ban's end, ms, that a replica started alone
--              while Redis was away (0 for none): the state is banned
--              until then at least. Then, the rest of the argument, FROM:
--              where a state with neither form takes its previous form:
--              nothing, the hash at its third name; "?" elsewhere, unknown
--              yet (the state is not decided: flag 3, and the replica
--              calls again with it); "=" and the previous form's text as
--              the replica read it ("=" alone: there was none); "!" the
--              state has this form (the replica's calls decided it
--              lately), so only its first name is given: should it be
--              missing after all (its TTL ran out), it is not decided
--              (flag 3), and the replica calls again naming all three.
--              Why: two names fewer are two objects fewer for Redis to
--              make, and the state is nearly always there.
--              Why FROM in the same argument: every argument is an object
--              Redis makes and a Lua string the script is handed, read or
--              not; FROM's first byte is read where it lies.
--
-- The stored state, one string with a TTL: a version byte (3), six
-- little-endian 64-bit integers, mm, mf, dm, df (the minute and day
-- buckets, ms and fraction, below), the ban's end and the last
-- Retry-After (0 for none), then the strikes in their window as text (ms,
-- comma-separated). The previous forms hold the same fields: the text
-- `mm:mf:dm:df:bu:ra:r` (empty for none) at `:v2`, the hash's fields
-- mm, mf, dm, df, bu, ra, r. A state with no `:v3` form yet takes over
-- its `:v2` text, else its previous form as FROM says: on one Redis the
-- hash at the name without a suffix; in a cluster the state under its
-- own hash tag, in another slot, which the replica reads (carry.lua). So
-- a deploy neither refills a quota nor lifts a ban; replicas of the
-- previous version go on with their previous form meanwhile, untouched.
-- Anything else at a state's name is reset: decided as a fresh state,
-- and reported.

-- Returns one binary string (a reply of hundreds of integers cost the
-- replica's client more to parse than the rest of the call): the instant
-- (ms) as a little-endian 64-bit integer, then per state a flag byte (0
-- decided; 1 decided after resetting what was there; 2 not stored, so
-- not decided; 3 missing, its previous form to be read by the replica,
-- so not decided) followed, unless 2 or 3, by 74 bytes per request: the
-- outcome (0 allowed, 1 limited, 2 banned) and whether a ban started
-- (0/1) as bytes, then nine little-endian 64-bit integers: per window
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

-- Parses a state in the previous version's text form: mm, mf, dm, df, the ban's end,
-- the last Retry-After (nil for none) and the strikes' text; nil when
-- `text` is not one.
local function parse(text)
  local mm, mf, dm, df, bu, ra, r =
    string.match(text, '^(%d+):(%d+):(%d+):(%d+):(%d*):(%d*):([%d,]*)$')
  if mm then
    return tonumber(mm), tonumber(mf), tonumber(dm), tonumber(df), tonumber(bu), tonumber(ra), r
  end
  return nil
end

-- One request's part of the reply: outcome and ban started as bytes, then
-- nine little-endian 64-bit integers (see the header).
local REPLY = '<BBi8i8i8i8i8i8i8i8i8'

-- The stored form: its version byte, then mm, mf, dm, df, the ban's end
-- and the last Retry-After; the strikes' text follows.
local STATE = '<Bi8i8i8i8i8i8'
local STATE_LEN = 49

-- A state in the stored form: mm, mf, dm, df, the ban's end, the last
-- Retry-After (nil for none) and the strikes' text; nil when `bytes` is
-- not one.
local function unpack_state(bytes)
  if #bytes < STATE_LEN or string.byte(bytes, 1) ~= 3 then
    return nil
  end
  local _, mm, mf, dm, df, bu, ra, rest = struct.unpack(STATE, bytes)
  local r = string.sub(bytes, rest)
  if mm < 0 or mf < 0 or dm < 0 or df < 0 or bu < 0 or ra < 0
    or (r ~= '' and not string.find(r, '^[%d,]*$')) then
    return nil
  end
  if bu == 0 then
    bu = nil
  end
  if ra == 0 then
    ra = nil
  end
  return mm, mf, dm, df, bu, ra, r
end

-- FROM's first byte (see ARGV): '!', '?', '='; nil for nothing.
local NAMED_ALONE, UNREAD, GIVEN = 33, 63, 61

-- The state at `keys[1]` or, when there is none yet, its previous form:
-- the text at `keys[2]`, else as FROM says (see ARGV; `from` is its first
-- byte, `arg` the state's argument) the hash at `keys[3]` or the
-- replica's text. Returns whether it was reset, then mm, mf, dm, df, the
-- ban's end, the last Retry-After (nil for none) and the strikes' text;
-- nothing at all when the state is missing and FROM is '?' (or '!':
-- `text_key` and `hash_key` are nil then).
local function read(key, text_key, hash_key, from, arg)
  local got = redis.pcall('GET', key)
  if type(got) == 'string' then
    local mm, mf, dm, df, bu, ra, r = unpack_state(got)
    if mm then
      return false, mm, mf, dm, df, bu, ra, r
    end
    return true, 0, 0, 0, 0, nil, nil, ''
  elseif got ~= false then
    return true, 0, 0, 0, 0, nil, nil, ''
  elseif from == NAMED_ALONE then
    return nil
  end
  local text = redis.pcall('GET', text_key)
  if type(text) == 'string' then
    local mm, mf, dm, df, bu, ra, r = parse(text)
    if mm then
      return false, mm, mf, dm, df, bu, ra, r
    end
  end
  if from == UNREAD then
    return nil
  elseif from == GIVEN then
    local mm, mf, dm, df, bu, ra, r = parse(string.sub(arg, 58))
    if mm then
      return false, mm, mf, dm, df, bu, ra, r
    end
    -- '=' alone (nothing before), or not a state: a fresh one.
    return false, 0, 0, 0, 0, nil, nil, ''
  end
  local st = redis.pcall('HMGET', hash_key, 'mm', 'mf', 'dm', 'df', 'bu', 'ra', 'r')
  if st.err then
    st = {}
  end
  return false, tonumber(st[1]) or 0, tonumber(st[2]) or 0, tonumber(st[3]) or 0,
    tonumber(st[4]) or 0, tonumber(st[5]), tonumber(st[6]), st[7] or ''
end

local now
if ARGV[1] == '' then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + idiv(tonumber(t[2]), 1000)
else
  now = tonumber(ARGV[1])
end
-- Checked before anything is decided: a call whose names do not add up
-- changes nothing.
local states = #ARGV - 1
local names = 0
for k = 2, #ARGV do
  if string.byte(ARGV[k], 57) == NAMED_ALONE then
    names = names + 1
  else
    names = names + 3
  end
end
if names ~= #KEYS then
  return redis.error_reply('expected one argument and one or three names per state')
end

local out = { struct.pack('<i8', now) }
local at = 1
for k = 1, states do
  local key = KEYS[at]
  local text_key, hash_key
  local arg = ARGV[k + 1]
  local from = string.byte(arg, 57)
  if from == NAMED_ALONE then
    at = at + 1
  else
    text_key, hash_key = KEYS[at + 1], KEYS[at + 2]
    at = at + 3
  end
  if #arg < 56 or (from ~= nil and from ~= NAMED_ALONE and from ~= UNREAD and from ~= GIVEN)
    or (from ~= GIVEN and #arg > 57) then
    return redis.error_reply('bad arguments for ' .. key)
  end
  local mcap, dcap, strikes, window, ban, count, ban_at_least =
    struct.unpack('<i8i8i8i8i8i8i8', arg)
  if mcap < 1 or dcap < 0 or strikes < 0 or window < 0 or ban < 0 or count < 0
    or count > 1000 or ban_at_least < 0 then
    return redis.error_reply('bad arguments for ' .. key)
  end

  -- The state, read once and written once for all its requests.
  local reset, mm, mf, dm, df, banned_until, retry_at, refusals_text = read(key, text_key, hash_key, from, arg)
  if reset == nil then
    -- Missing, and its previous form is elsewhere: the replica reads it
    -- and calls again with it. Nothing decided, nothing written.
    out[#out + 1] = '\3'
  else
    local charged, struck = false, false
    local changed = reset
    if ban_at_least > now and (not banned_until or banned_until < ban_at_least) then
      banned_until = ban_at_least
      changed = true
    end

    local flag = #out + 1
    out[flag] = '\0'
    if reset then
      out[flag] = '\1'
    end
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
      local m1, m2, m3 = window_reply(outcome, ma, mr, mtms, mtfrac, mnms, mnfrac)
      local d1, d2, d3 = window_reply(outcome, da, dr, dtms, dtfrac, dnms, dnfrac)
      local ends = 0
      if outcome == 2 then
        ends = banned_until
      end
      out[#out + 1] = struct.pack(REPLY, outcome, started, m1, m2, m3, mwait, d1, d2, d3, dwait, ends)
    end

    -- One write for the state: when a request went ahead, one was refused
    -- (its strike fields), a ban was carried in, or what was there was not
    -- a state. A TTL on every write, outliving every field: the buckets
    -- full again, the ban over, the Retry-After passed, the last strike out
    -- of its window. Past that, a missing state is exactly a fresh limiter.
    if charged or struck or changed then
      local keep = math.max(mm + 1, dm + 1, retry_at or 0, banned_until or 0)
      if refusals_text ~= '' then
        local last = string.match(refusals_text, '(%d+)$')
        if last then
          keep = math.max(keep, tonumber(last) + window)
        end
      end
      local value = struct.pack(STATE, 3, mm, mf, dm, df, banned_until or 0, retry_at or 0)
        .. refusals_text
      local set = redis.pcall('SET', key, value, 'PX', int(math.max(keep - now + 1000, 1000)))
      if type(set) == 'table' and set.err then
        -- Not stored (out of memory, say): these requests were not
        -- charged, so their replica decides them alone.
        for i = #out, flag + 1, -1 do
          out[i] = nil
        end
        out[flag] = '\2'
      end
    end
  end
end

return table.concat(out)
