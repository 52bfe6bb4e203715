-- GET /v1/pets/{id} with an id drawn uniformly from 1..N, N the first
-- script argument (wrk ... -- N): the pets seeded before the run.
local max_id = 1000

function init(args)
   if args[1] then max_id = tonumber(args[1]) end
end

function request()
   return wrk.format("GET", "/v1/pets/" .. math.random(1, max_id))
end
