-- POST /v1/pets with a fixed valid body: creates, each through the
-- journal's group commit.
wrk.method = "POST"
wrk.body = '{"name":"x","categoryId":1}'
wrk.headers["Content-Type"] = "application/json"
