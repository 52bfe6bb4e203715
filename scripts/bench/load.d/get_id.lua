-- GET /v1/pets/{id} with an id drawn uniformly from 1..N, N the first
-- script argument (wrk ... -- N; default 10000: the seeded pets).
local max_id = 10000

function init(args)
   if args[1] then max_id = tonumber(args[1]) end
   load_seed()
end

function request()
   return wrk.format("GET", "/v1/pets/" .. math.random(1, max_id))
end
