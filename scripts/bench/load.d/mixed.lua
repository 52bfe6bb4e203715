-- The mixed load of the memory check: per request, 5% POST /v1/pets,
-- 30% GET /v1/pets?limit=20, 30% GET /v1/pets?status=S&limit=20 (S random),
-- 35% GET /v1/pets/{id} with id uniform in 1..N (N the first script
-- argument, default 1000000: the pets of the replayed journal).
local max_id = 1000000
local post_req, list_req
local status_reqs = {}

function init(args)
   if args[1] then max_id = tonumber(args[1]) end
   load_seed()
   -- wrk.format with a headers table sends only that table (and Host):
   -- copy the -H headers (Authorization) and add the content type.
   local post_headers = {}
   for k, v in pairs(wrk.headers) do post_headers[k] = v end
   post_headers["Content-Type"] = "application/json"
   post_req = wrk.format("POST", "/v1/pets", post_headers,
      '{"name":"mixed","categoryId":3,"status":"available"}')
   list_req = wrk.format("GET", "/v1/pets?limit=20")
   for i, s in ipairs({"available", "pending", "sold"}) do
      status_reqs[i] = wrk.format("GET", "/v1/pets?status=" .. s .. "&limit=20")
   end
end

function request()
   local r = math.random(100)
   if r <= 5 then
      return post_req
   elseif r <= 35 then
      return list_req
   elseif r <= 65 then
      return status_reqs[math.random(3)]
   else
      return wrk.format("GET", "/v1/pets/" .. math.random(1, max_id))
   end
end
