-- POST /v1/pets with post.lua's body, the request made in Lua each time,
-- with a new Idempotency-Key on each when the first script argument is
-- `keyed` (wrk ... -- keyed|plain RUN). Keyed and plain runs pay the same
-- Lua per request, so their ratio is the cost of the key alone. A key is
-- RUN, the thread's own table address and a counter: unique in the run,
-- and across runs as long as RUN differs.
local keyed = false
local prefix = ""
local n = 0
local headers = {}
local body = '{"name":"x","categoryId":1,"status":"sold"}'

function init(args)
   keyed = args[1] == "keyed"
   prefix = (args[2] or "run") .. "-" .. ((tostring({}):match("0x(%x+)")) or "0") .. "-"
   -- wrk.format with a headers table sends only that table (and Host):
   -- copy the -H headers (Authorization) and add the content type.
   for k, v in pairs(wrk.headers) do headers[k] = v end
   headers["Content-Type"] = "application/json"
end

function request()
   n = n + 1
   if keyed then headers["Idempotency-Key"] = prefix .. n end
   return wrk.format("POST", "/v1/pets", headers, body)
end
