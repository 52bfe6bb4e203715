-- POST /v1/pets with a fixed valid body (201 from the server): wrk's static
-- request, built once per thread from these fields plus the -H headers.
wrk.method = "POST"
wrk.body = '{"name":"x","categoryId":1,"status":"sold"}'
wrk.headers["Content-Type"] = "application/json"
