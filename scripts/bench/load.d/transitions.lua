-- Transitions on pets the run owns (the durable server, or a replica):
-- POST /v1/pets/{id}/reserve and /release in turn (wrk ... -- FIRST
-- LAST THREADS STATUSES). Thread t of THREADS owns the ids FIRST+t,
-- FIRST+t+THREADS, ... up to LAST and walks them in a ring, so a pet
-- comes round again only after its thread has sent as many requests as
-- it owns pets (far more than its connections): its previous transition
-- has been answered by then, and nearly every request is an allowed
-- step. A conflict counts for nothing: only 200s are transitions made.
-- STATUSES is a file of `id status` lines (clients.py, statuses): where
-- the previous run left each pet. A 409 names the pet's current status,
-- which the next step then starts from; a sold pet (final) leaves the
-- ring.
local threads = {}
local next_index = 0

function setup(thread)
   thread:set("index", next_index)
   next_index = next_index + 1
   table.insert(threads, thread)
end

local ring = {}
local pos = 0
-- wrk calls the first thread's request() once before the run, to check
-- what it returns, and never sends that request: that call must not step
-- a pet, or the pet's next request would be the wrong step (a 409 every
-- run).
local check_call = false
local status = {}
local reserve_req, release_req = {}, {}
ok, conflicts, other_status = 0, 0, 0

function init(args)
   check_call = index == 0
   local first, last, count = tonumber(args[1]), tonumber(args[2]), tonumber(args[3])
   for line in io.lines(args[4]) do
      local id, s = line:match("^(%d+) (%a+)$")
      if id then status[tonumber(id)] = s end
   end
   for id = first + index, last, count do
      if status[id] == "available" or status[id] == "pending" then
         table.insert(ring, id)
         reserve_req[id] = wrk.format("POST", "/v1/pets/" .. id .. "/reserve")
         release_req[id] = wrk.format("POST", "/v1/pets/" .. id .. "/release")
      end
   end
end

function request()
   if check_call then
      check_call = false
      return wrk.format("POST", "/v1/pets/0/reserve")
   end
   for _ = 1, #ring do
      pos = pos % #ring + 1
      local id = ring[pos]
      local s = status[id]
      if s == "available" then
         status[id] = "pending"
         return reserve_req[id]
      elseif s == "pending" then
         status[id] = "available"
         return release_req[id]
      end
   end
   -- Nothing left to drive: a request that cannot succeed, counted apart.
   return wrk.format("POST", "/v1/pets/0/reserve")
end

function response(code, headers, body)
   if code == 200 then
      ok = ok + 1
   elseif code == 409 then
      conflicts = conflicts + 1
      local id, s = body:match("pet (%d+) is (%a+);")
      if id then status[tonumber(id)] = s end
   else
      other_status = other_status + 1
   end
end

-- Added to report.lua's LOADSTATS line: the threads' counts.
function extra_stats()
   local sum = { ok = 0, conflicts = 0, other_status = 0 }
   for _, t in ipairs(threads) do
      for k in pairs(sum) do sum[k] = sum[k] + t:get(k) end
   end
   return string.format(',"ok":%d,"conflicts":%d,"other_status":%d',
      sum.ok, sum.conflicts, sum.other_status)
end
