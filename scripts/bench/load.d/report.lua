-- Shared by every scenario of scripts/bench/load (prepended to each scenario
-- script): at the end of a wrk run, print one machine-readable line with
-- the numbers the benchmark keeps. Times are microseconds.
--
--   LOADSTATS {"requests":...,"duration_us":...,"status_errors":...,...}
--
-- status_errors is wrk's count of responses with a status above 399; the
-- socket errors are connect, read, write and timeout (wrk's default 2 s).
-- A scenario that counts more (transitions.lua) defines extra_stats(),
-- whose `,"name":value` fields end the line.
function done(summary, latency, requests)
   local e = summary.errors
   local extra = extra_stats and extra_stats() or ""
   io.write(string.format(
      'LOADSTATS {"requests":%.0f,"duration_us":%.0f,"bytes":%.0f,' ..
      '"status_errors":%.0f,"connect_errors":%.0f,"read_errors":%.0f,' ..
      '"write_errors":%.0f,"timeout_errors":%.0f,' ..
      '"p50_us":%.0f,"p90_us":%.0f,"p99_us":%.0f,"max_us":%.0f,"mean_us":%.1f%s}\n',
      summary.requests, summary.duration, summary.bytes,
      e.status, e.connect, e.read, e.write, e.timeout,
      latency:percentile(50.0), latency:percentile(90.0),
      latency:percentile(99.0), latency.max, latency.mean, extra))
end

-- A per-thread random seed: the threads start in the same second, so mix
-- in the address of a fresh table (different in each thread's Lua state).
function load_seed()
   local addr = tonumber((tostring({}):match("0x(%x+)")) or "0", 16) or 0
   math.randomseed(os.time() + addr % 1000003)
   for _ = 1, 10 do math.random() end
end
