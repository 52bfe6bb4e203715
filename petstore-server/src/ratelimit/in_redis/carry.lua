-- A cluster state's previous form, read by the replica when the state has
-- none at its group's name yet (limit.lua answered flag 3), and given to
-- limit.lua with its next call (FROM "=<text>"). Read only.
--
-- KEYS[1]  the previous name in this script's string form,
--          `{<sha256 hex>}:m<perMinute>/d<perDay>:v2` (or the anonymous
--          one), in the slot of the state's own hash tag;
-- KEYS[2]  the same name without `:v2`, where the version before that
--          kept the state as a hash (same slot).
--
-- Returns the state's text in limit.lua's form, or "" when there is none
-- (or what is there is not a state: limit.lua then starts it afresh).
local got = redis.pcall('GET', KEYS[1])
if type(got) == 'string' then
  return got
end
local st = redis.pcall('HMGET', KEYS[2], 'mm', 'mf', 'dm', 'df', 'bu', 'ra', 'r')
if st.err or not (st[1] or st[3] or st[5] or st[6]) then
  return ''
end
return (st[1] or '0') .. ':' .. (st[2] or '0') .. ':' .. (st[3] or '0') .. ':'
  .. (st[4] or '0') .. ':' .. (st[5] or '') .. ':' .. (st[6] or '') .. ':' .. (st[7] or '')
