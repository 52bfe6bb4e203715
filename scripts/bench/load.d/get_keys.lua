-- GET of the URL given to wrk with one of N keys per request, in turn:
-- `PREFIX0` .. `PREFIX<N-1>` (wrk ... -- PREFIX N). The requests are
-- made once in init(), so wrk spends no more per request than a table
-- lookup. The replica with Redis then decides mostly lone requests (a
-- batch of one per key), where one key's many connections share calls.
local requests = {}
local n = 0

function init(args)
   local prefix, count = args[1], tonumber(args[2])
   for i = 0, count - 1 do
      requests[i + 1] = wrk.format(nil, nil, { ["Authorization"] = "Bearer " .. prefix .. i })
   end
end

function request()
   n = n % #requests + 1
   return requests[n]
end
