"""The load benchmark's records and report: a run's wrk, pgbench and
redis-benchmark output turned into rows (one JSON line per run), and the
rows into the Markdown report, its ratios and its verdicts against the
targets of thresholds.py. Python's standard library only; no I/O but
the files named and stdout, so that test_load.py can run it on rows of
its own.
"""

import csv
import json
import os
import re
import statistics

import thresholds


# --- one run ----------------------------------------------------------------

def record(kind, log, scenario, conns, target, rnd, cpu_ticks, clk_tck,
           wrk_status, started=None, ended=None):
    """One run's results: the LOADSTATS line of report.lua in the wrk log
    (or, KIND pgbench or redis, the summary of pgbench or
    redis-benchmark), as the row the report reads and a one-line
    summary."""
    stats = {"wrk": wrk_stats, "pgbench": pgbench_stats,
             "redis": redis_stats}[kind](log)
    row = {
        "scenario": scenario, "conns": conns, "target": target,
        "round": rnd, "log": log, "wrk_status": wrk_status,
        "kind": kind,
    }
    if started is not None:
        row.update(started=started, ended=ended)
    if stats is None or (kind != "wrk" and wrk_status != 0):
        row["missing"] = True
        row.update(requests=0, rps=0.0, p50_ms=0.0, p99_ms=0.0,
                   non2xx=0, socket_errors=0, cpu_s=0.0, cpu_per_100k=None)
        summary = f"NO RESULT (exit {wrk_status}; see {log})"
    elif kind != "wrk":
        cpu_s = cpu_ticks / clk_tck
        row.update(stats, cpu_s=cpu_s, socket_errors=0,
                   cpu_per_100k=(cpu_s / stats["requests"] * 100_000
                                 if cpu_ticks and stats["requests"] else None))
        summary = (f"{row['rps']:>9.0f} /s  p50 {fmt(row['p50_ms'])} ms  "
                   f"p99 {fmt(row['p99_ms'])} ms  latency avg "
                   f"{fmt(row.get('avg_ms'))} ms  errors {row['non2xx']}")
    else:
        secs = stats["duration_us"] / 1e6
        requests = stats["requests"]
        cpu_s = cpu_ticks / clk_tck
        row.update(
            requests=requests,
            rps=requests / secs if secs > 0 else 0.0,
            p50_ms=stats["p50_us"] / 1000, p99_ms=stats["p99_us"] / 1000,
            max_ms=stats["max_us"] / 1000,
            non2xx=stats["status_errors"],
            socket_errors=(stats["connect_errors"] + stats["read_errors"]
                           + stats["write_errors"] + stats["timeout_errors"]),
            socket_detail={k: stats[k + "_errors"]
                           for k in ("connect", "read", "write", "timeout")},
            cpu_s=cpu_s,
            cpu_per_100k=cpu_s / requests * 100_000 if requests else None,
        )
        summary = (f"{row['rps']:>9.0f} req/s  p50 {row['p50_ms']:7.2f} ms  "
                   f"p99 {row['p99_ms']:7.2f} ms  "
                   f"cpu/100k {fmt(row['cpu_per_100k'], 2)} s  "
                   f"non-2xx {row['non2xx']}  socket errors {row['socket_errors']}")
        # transitions.lua: 200s (transitions made), 409s and any other
        # status, apart; wrk's own non-2xx count holds all but the 200s.
        if "ok" in stats:
            row.update(ok=stats["ok"], conflicts=stats["conflicts"],
                       other_status=stats["other_status"],
                       ok_per_s=stats["ok"] / secs if secs > 0 else 0.0)
            summary += (f"  transitions {row['ok_per_s']:.0f}/s, "
                        f"409s {row['conflicts']}, other {row['other_status']}")
    return row, f"{scenario:<13} c={conns:<4} {target:<8} r{rnd}: {summary}"


def wrk_stats(path):
    stats = None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("LOADSTATS "):
                stats = json.loads(line[len("LOADSTATS "):])
    return stats


def pgbench_stats(path):
    """pgbench's summary: tps (without the connections' set-up), the
    average latency, the transactions and the failed ones (PostgreSQL 15
    counts failures and goes on)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    tps = re.search(r"^tps = ([0-9.]+) \(without initial connection time\)", text, re.M)
    done = re.search(r"^number of transactions actually processed: (\d+)", text, re.M)
    if not tps or not done:
        return None
    failed = re.search(r"^number of failed transactions: (\d+)", text, re.M)
    avg = re.search(r"^latency average = ([0-9.]+) ms", text, re.M)
    return {"rps": float(tps.group(1)), "requests": int(done.group(1)),
            "non2xx": int(failed.group(1)) if failed else 0,
            "avg_ms": float(avg.group(1)) if avg else None,
            "p50_ms": None, "p99_ms": None}


def redis_csv(lines):
    rows = [r for r in csv.reader(lines) if r]
    if len(rows) < 2 or rows[0][:2] != ["test", "rps"]:
        return None
    return dict(zip(rows[0], rows[1]))


def redis_stats(path):
    """redis-benchmark --csv: one line of req/s and latencies (ms)."""
    with open(path, encoding="utf-8", errors="replace") as f:
        r = redis_csv(f)
    if r is None:
        return None
    return {"rps": float(r["rps"]), "requests": None, "non2xx": 0,
            "avg_ms": float(r["avg_latency_ms"]),
            "p50_ms": float(r["p50_latency_ms"]),
            "p99_ms": float(r["p99_latency_ms"])}


# --- the report -------------------------------------------------------------

# Every scenario's label, as the report's rows name it.
SCENARIOS = {
    "list": "GET /v1/pets?limit=20",
    "list_sold": "GET /v1/pets?status=sold&limit=20",
    "list_keys": "GET /v1/pets?limit=20, 64 keys in turn",
    "get_id": "GET /v1/pets/{random id}",
    "post_mem": "POST /v1/pets (in memory)",
    "post_durable": "POST /v1/pets (durable, fsync always)",
    "list_nometrics": "GET /v1/pets?limit=20, --metrics false",
    "list_accesslog": "GET /v1/pets?limit=20, --access-log",
    "list_available": "GET /v1/pets?status=available&limit=20",
    "list_tx": "GET /v1/pets?limit=20, 1,000 transitions/s beside",
    "list_sold_tx": "GET /v1/pets?status=sold&limit=20, 1,000 transitions/s beside",
    "list_available_tx": "GET /v1/pets?status=available&limit=20, 1,000 transitions/s beside",
    "mixed": "mixed (memory check)",
}


def fmt(x, digits=2):
    return "n/a" if x is None else f"{x:.{digits}f}"


def median(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def by_round(rows, scenario, conns, target):
    """The runs of one target in one scenario and connection count, by
    round; runs that gave no result are left out."""
    return {r["round"]: r for r in rows
            if (r["scenario"], r["conns"], r["target"]) == (scenario, conns, target)
            and not r.get("missing")}


def paired(a, b, field="rps"):
    """Each run of `a` over the run of `b` in the same round (the rounds
    interleave the targets, so the two ran next to each other): the
    ratios of `field`, in round order."""
    return [a[n][field] / b[n][field] for n in sorted(a)
            if n in b and a[n].get(field) and b[n].get(field)]


def read_rows(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def report(results, memory=None, memory_meta=None, batches=None,
           redis_batches=None, backgrounds=None, tx_batches=None):
    """The Markdown report of a run, on stdout: the single node's table,
    then each section whose runs RESULTS holds. Returns 3 when a run had
    errors (or gave no result), else 0."""
    rows = read_rows(results)
    failures = []
    for r in rows:
        if r.get("missing"):
            failures.append(f"{r['scenario']} c={r['conns']} {r['target']} "
                            f"round {r['round']}: wrk gave no result "
                            f"(exit {r['wrk_status']}, log {r['log']})")
        elif "ok" in r and (r["other_status"] or r["socket_errors"] or not r["ok"]):
            # Transitions: a 409 is an outcome, reported apart; any
            # other status, or none made at all, is an error.
            failures.append(f"{r['scenario']} c={r['conns']} {r['target']} "
                            f"round {r['round']}: {r['ok']} transitions made, "
                            f"{r['other_status']} statuses neither 200 nor 409, "
                            f"{r['socket_errors']} socket errors")
        elif "ok" not in r and (r["non2xx"] or r["socket_errors"]):
            failures.append(f"{r['scenario']} c={r['conns']} {r['target']} "
                            f"round {r['round']}: {r['non2xx']} non-2xx, "
                            f"{r['socket_errors']} socket errors "
                            f"{r.get('socket_detail')}")

    keys = []
    for r in rows:
        k = (r["scenario"], r["conns"])
        if k not in keys and r["scenario"] in SCENARIOS and r["scenario"] != "mixed":
            keys.append(k)

    print("| scenario | conns | req/s | baseline req/s | ratio | per-round ratios "
          "| p50 ms | p99 ms | p99 ratio | CPU s/100k req | CPU ratio | target "
          "| verdict | ratio to page-only |")
    print("|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|---|---|---:|")
    verdicts = []
    for scenario, conns in keys:
        srv, base, page = (by_round(rows, scenario, conns, t)
                           for t in ("server", "baseline", "page_only"))
        rps = median([r["rps"] for r in srv.values()])
        b_rps = median([r["rps"] for r in base.values()])
        p50 = median([r["p50_ms"] for r in srv.values()])
        p99 = median([r["p99_ms"] for r in srv.values()])
        cpu = median([r["cpu_per_100k"] for r in srv.values()])
        per_round = paired(srv, base)
        ratio = median(per_round)
        p99_ratio = median(paired(srv, base, "p99_ms"))
        cpu_ratio = median(paired(srv, base, "cpu_per_100k"))
        page_ratio = median(paired(srv, page))
        target_text, verdict = thresholds.single_node_verdict(scenario, ratio, p99_ratio)
        if verdict is None:
            verdict = "-"
        else:
            verdicts.append((SCENARIOS[scenario], conns, verdict))
        rounds_text = " ".join(f"{x:.2f}" for x in per_round) or "n/a"
        print(f"| {SCENARIOS[scenario]} | {conns} | {fmt(rps, 0)} | {fmt(b_rps, 0)} "
              f"| {fmt(ratio)} | {rounds_text} | {fmt(p50)} | {fmt(p99)} "
              f"| {fmt(p99_ratio)} | {fmt(cpu, 3)} | {fmt(cpu_ratio)} "
              f"| {target_text} | **{verdict}** "
              f"| {fmt(page_ratio) if page_ratio is not None else '-'} |")
    print()
    n_rounds = max((r["round"] for r in rows), default=0)
    print(f"{n_rounds} round(s) per row and target, interleaved. req/s, p50, "
          "p99 and CPU (utime+stime of the process per 100,000 requests) "
          "are the server's medians over the rounds; baseline req/s is the "
          "baseline's. Each round pairs a server run with the baseline run "
          "right after it: per-round ratios = server req/s / baseline req/s "
          "of each round (their spread is the noise), and ratio, p99 ratio "
          "and CPU ratio are the medians of the rounds' ratios (the verdict "
          "uses them). The baseline answers the server's own list response, "
          "headers included (the same bytes); page-only answers the page "
          "with only a Content-Type (the ruler of earlier reports), at the "
          "first connection count only, two runs after each server run.")
    print()
    # LOAD_BEFORE: the server of another revision in the same rounds.
    befores = [k for k in keys if any(
        (r["scenario"], r["conns"], r["target"]) == (*k, "before") for r in rows)]
    if befores:
        print("Before and after (LOAD_BEFORE; the same rounds, the same "
              "baseline; medians of the rounds' paired ratios):")
        print()
        print("| scenario | conns | before / baseline | now / baseline "
              "| now / before | per-round now / before |")
        print("|---|---:|---:|---:|---:|---|")
        for scenario, conns in befores:
            srv, base, before = (by_round(rows, scenario, conns, t)
                                 for t in ("server", "baseline", "before"))
            gain = paired(srv, before)
            print(f"| {SCENARIOS[scenario]} | {conns} "
                  f"| {fmt(median(paired(before, base)))} "
                  f"| {fmt(median(paired(srv, base)))} | {fmt(median(gain))} "
                  f"| {' '.join(f'{x:.2f}' for x in gain)} |")
        print()
    replica_verdicts = replica_report(rows, batches, redis_batches)
    tx_verdicts, tx_failures = transitions_report(rows, backgrounds, tx_batches)
    failures += tx_failures
    # The cost of the observability features: the same list scenario on
    # servers that differ only in one flag, each as a ratio to its own
    # interleaved baseline runs.
    def ratio_of(scenario, conns):
        return median(paired(by_round(rows, scenario, conns, "server"),
                             by_round(rows, scenario, conns, "baseline")))
    for conns in sorted({r["conns"] for r in rows if r["scenario"] == "list_nometrics"}):
        on, off, logged = ratio_of("list", conns), ratio_of("list_nometrics", conns), ratio_of("list_accesslog", conns)
        if on and off:
            print(f"Cost of metrics (list, {conns} connections): {100 * (1 - on / off):+.1f}% of "
                  f"throughput (ratio to baseline {on:.2f} with, {off:.2f} without).")
        if on and logged:
            print(f"Cost of --access-log (list, {conns} connections): {100 * (1 - logged / on):+.1f}% of "
                  f"throughput (ratio to baseline {logged:.2f} with, {on:.2f} without).")
    print()
    met = sum(1 for v in verdicts if v[2] == "MET")
    print(f"Targets: {met} of {len(verdicts)} MET: {thresholds.single_node_summary()}")
    for name, conns, verdict in verdicts:
        if verdict != "MET":
            print(f"- MISSED: {name} at {conns} connections")

    if replica_verdicts:
        met = sum(1 for v in replica_verdicts if v[1] == "MET")
        print(f"Replica targets (LOAD_REPLICAS): {met} of {len(replica_verdicts)} MET.")
        for name, verdict in replica_verdicts:
            if verdict != "MET":
                print(f"- MISSED: {name}")

    if tx_verdicts:
        met = sum(1 for v in tx_verdicts if v[1] == "MET")
        print(f"Transition targets (LOAD_TRANSITIONS): {met} of {len(tx_verdicts)} MET.")
        for name, verdict in tx_verdicts:
            if verdict != "MET":
                print(f"- {verdict}: {name}")

    if memory and os.path.exists(memory):
        failures += memory_report(memory, memory_meta)

    print()
    if failures:
        for f in failures:
            print(f"FAIL: {f}")
        print(f"FAIL: {len(failures)} run(s) with errors: every run must have "
              "zero non-2xx responses and zero socket errors")
        return 3
    print("No errors: every run had zero non-2xx responses and zero socket "
          "errors.")
    return 0


REPLICA_TARGETS = [
    ("list", "server", "single node, GET /v1/pets?limit=20"),
    ("list", "replica", "replica (--postgres), GET /v1/pets?limit=20"),
    ("list", "replica_redis", "replica + Redis (--postgres --redis), GET /v1/pets?limit=20"),
    ("list", "cluster", "scripts/cluster: HAProxy + 2 replicas + PostgreSQL + Redis, "
     "GET /v1/pets?limit=20 (CPU: not measured)"),
    ("list_keys", "server", "single node, GET /v1/pets?limit=20, 64 keys in turn"),
    ("list_keys", "replica_redis", "replica + Redis, GET /v1/pets?limit=20, 64 keys in turn"),
    ("list", "redis_ceiling", "redis-benchmark -c 64, the list request's EVALSHA (calls/s)"),
    ("list", "redis_ceiling_p16", "redis-benchmark -c 64 -P 16, the same (calls/s)"),
    ("get_id", "server", "single node, GET /v1/pets/{random id}"),
    ("get_id", "replica", "replica, GET /v1/pets/{random id}"),
    ("post_mem", "server", "single node, POST /v1/pets, in memory"),
    ("post_mem", "durable", "single node, POST /v1/pets, durable, fsync always"),
    ("post_mem", "replica", "replica, POST /v1/pets (batched commits)"),
    ("post_mem", "replica_tx", "replica, POST /v1/pets/{id}/reserve|release "
     "(LOAD_TRANSITIONS; all statuses)"),
    ("post_mem", "pgbench", "pgbench, one create per transaction (tps)"),
]


def replica_report(rows, batches_path=None, redis_batches_path=None):
    """The Replicas section (LOAD_REPLICAS): every figure is a median over
    the rounds of ratios paired within a round. Returns the verdicts."""
    conns = sorted({r["conns"] for r in rows
                    if r["target"] in ("replica", "replica_redis", "cluster", "pgbench")})
    verdicts = []
    for c in conns:
        print(f"### Replicas (LOAD_REPLICAS), {c} connections")
        print()
        print("| target | req/s | p50 ms | p99 ms | CPU s/100k req |")
        print("|---|---:|---:|---:|---:|")
        for scenario, target, label in REPLICA_TARGETS:
            runs = by_round(rows, scenario, c, target)
            if not runs:
                continue
            print(f"| {label} | {fmt(median([r['rps'] for r in runs.values()]), 0)} "
                  f"| {fmt(median([r['p50_ms'] for r in runs.values()]))} "
                  f"| {fmt(median([r['p99_ms'] for r in runs.values()]))} "
                  f"| {fmt(median([r['cpu_per_100k'] for r in runs.values()]), 3)} |")
        pg = by_round(rows, "post_mem", c, "pgbench")
        if pg:
            print()
            print(f"pgbench: latency average {fmt(median([r.get('avg_ms') for r in pg.values()]))} ms "
                  "(it gives no percentiles); CPU column: the server process "
                  "(Redis's own for redis-benchmark; none for pgbench).")
        if batches_path and os.path.exists(batches_path):
            with open(batches_path, encoding="utf-8") as f:
                b = json.load(f)
            if b.get("transactions"):
                print()
                print(f"Replica POST's transactions (its /metrics, "
                      f"petstore_postgres_batch_size, over the {b['runs']} POST runs, "
                      f"{b['secs']} s each): {b['creates']:,} creates in "
                      f"{b['transactions']:,} transactions, "
                      f"{b['creates'] / b['transactions']:.1f} creates per transaction, "
                      f"{b['transactions'] / (b['runs'] * b['secs']):.0f} commits/s.")
        if redis_batches_path and os.path.exists(redis_batches_path):
            with open(redis_batches_path, encoding="utf-8") as f:
                per_scenario = json.load(f)
            for scenario, what in (("list", "one key"), ("list_keys", "64 keys in turn")):
                b = per_scenario.get(scenario, {})
                if b.get("calls"):
                    print()
                    print(f"Replica + Redis over the {scenario} runs ({what}; its "
                          f"/metrics, petstore_redis_decisions_total and the calls of "
                          f"petstore_redis_duration_seconds): {b['decided']:,} requests "
                          f"decided in {b['calls']:,} script calls, "
                          f"{b['decided'] / b['calls']:.1f} requests per call.")
        print()
        print("| ratio | per-round ratios | median | target | verdict |")
        print("|---|---|---:|---|---|")
        for label, (sa, ta), (sb, tb), minimum in thresholds.REPLICA_RATIOS:
            per_round = paired(by_round(rows, sa, c, ta), by_round(rows, sb, c, tb))
            if not per_round:
                continue
            ratio = median(per_round)
            if minimum is None:
                target_text, verdict = "(none)", "-"
            else:
                target_text = f">= {minimum:g}"
                verdict = thresholds.at_least(ratio, minimum)
                verdicts.append((f"{label}, {c} connections", verdict))
            print(f"| {label} | {' '.join(f'{x:.2f}' for x in per_round)} "
                  f"| {fmt(ratio)} | {target_text} | **{verdict}** |")
        print()
        lat = {t: by_round(rows, "list", c, t) for t in ("server", "replica", "replica_redis")}
        if lat["replica"] and lat["replica_redis"]:
            def m(t, f):
                return median([r[f] for r in lat[t].values()])
            print("The Redis round trip (list, "
                  f"{c} connections, wrk's medians): p50 {fmt(m('replica', 'p50_ms'))} ms "
                  f"without --redis, {fmt(m('replica_redis', 'p50_ms'))} ms with "
                  f"({fmt(m('replica_redis', 'p50_ms') - m('replica', 'p50_ms'))} ms more); "
                  f"p99 {fmt(m('replica', 'p99_ms'))} ms without, "
                  f"{fmt(m('replica_redis', 'p99_ms'))} ms with.")
            print()
        print("Each ratio pairs two runs of the same round (interleaved: "
              "single node, baseline, page only, then the replica targets), "
              "and the median is the verdict's. pgbench runs the committer's "
              "own statement with a batch of one, each in its own "
              "transaction (scripts/bench/load.d/create.pgbench), 64 clients; "
              "redis-benchmark sends the EVALSHA a lone list request sends "
              "(captured from Redis's MONITOR: same script, key and "
              "arguments, one request per call), 64 connections, 2 threads, "
              "one call in flight per connection, and 16 with -P 16. The "
              "server passes both: it pipelines the calls of concurrent "
              "requests over one multiplexed connection, and decides one "
              "key's concurrent requests in one call (the requests per call "
              "above). The cluster runs scripts/cluster (HAProxy, two "
              "replicas, their PostgreSQL and Redis) on the same two cores "
              "as wrk.")
        print()
    return verdicts


# LOAD_TRANSITIONS: (quiet scenario, the same list under transitions).
TX_LISTS = [("list", "list_tx"), ("list_sold", "list_sold_tx"),
            ("list_available", "list_available_tx")]


def background_rate(summary, run):
    """The background's transitions per second during one wrk run: its
    200s in the tenths of a second inside the run's window."""
    if "started" not in run:
        return None
    lo, hi = run["started"] * 10, run["ended"] * 10
    inside = sum(n for tenth, n in summary["ok_by_tenth"] if lo <= tenth < hi)
    secs = run["ended"] - run["started"]
    return inside / secs if secs > 0 else None


def tx_against_post(rows, c, scenario, post_target, tx_target, post_label,
                    latency_label, intro, why):
    """Prints the table of transitions made (200s) a second against the
    POST's req/s of the same rounds, and its median; returns the verdict
    against thresholds.TX_DURABLE_MIN. A durable server's and a replica's
    runs are reported alike."""
    post = by_round(rows, scenario, c, post_target)
    made = by_round(rows, scenario, c, tx_target)
    rounds = [n for n in sorted(made) if n in post and post[n]["rps"]]
    ratio = median([made[n]["ok_per_s"] / post[n]["rps"] for n in rounds])
    verdict = thresholds.at_least(ratio, thresholds.TX_DURABLE_MIN)
    conflicts = sum(r["conflicts"] for r in made.values())
    requests = sum(r["requests"] for r in made.values())
    print(intro)
    print()
    print(f"| round | {post_label} req/s | transitions made/s (200s) | 409s | ratio |")
    print("|---:|---:|---:|---:|---:|")
    for n in rounds:
        print(f"| {n} | {post[n]['rps']:.0f} | {made[n]['ok_per_s']:.0f} "
              f"| {made[n]['conflicts']} "
              f"| {made[n]['ok_per_s'] / post[n]['rps']:.2f} |")
    print()
    print(f"Median ratio **{fmt(ratio)}** (target >= {thresholds.TX_DURABLE_MIN}): "
          f"**{verdict}**. Conflicts: {conflicts:,} of {requests:,} "
          f"transition requests{why}. Transition "
          f"p50/p99 {fmt(median([r['p50_ms'] for r in made.values()]))}/"
          f"{fmt(median([r['p99_ms'] for r in made.values()]))} ms, "
          f"{latency_label} {fmt(median([r['p50_ms'] for r in post.values()]))}/"
          f"{fmt(median([r['p99_ms'] for r in post.values()]))} ms.")
    return verdict


def transitions_report(rows, backgrounds_dir, tx_batches_path=None):
    """The Transitions section (LOAD_TRANSITIONS). Returns the verdicts
    and the failures (a background client's statuses other than 200 and
    409)."""
    verdicts, failures = [], []
    tx = [r for r in rows if r["target"] == "transitions"]
    rtx = [r for r in rows if r["target"] == "replica_tx"]
    if not tx and not rtx and not any(r["scenario"].endswith("_tx") for r in rows):
        return verdicts, failures
    print("### Transitions (LOAD_TRANSITIONS)")
    print()
    for c in sorted({r["conns"] for r in tx}):
        verdict = tx_against_post(
            rows, c, "post_durable", "server", "transitions", "durable POST", "POST",
            f"Durable (`--data`, `--fsync always`), {c} connections, "
            "transitions.lua against POST /v1/pets in the same rounds:",
            " (each thread walks pets it owns; a 409 writes nothing and is "
            "not counted as made)")
        verdicts.append((f"durable transitions / durable POST, {c} connections", verdict))
        print()

    for c in sorted({r["conns"] for r in rtx}):
        verdict = tx_against_post(
            rows, c, "post_mem", "replica", "replica_tx", "replica POST", "replica POST",
            f"Replica (`--postgres`, the run's PostgreSQL), {c} connections, "
            "transitions.lua against the replica's POST /v1/pets in the same "
            "rounds (each transition decided in PostgreSQL, in the "
            "committer's batches):",
            "")
        verdicts.append((f"replica transitions / replica POST, {c} connections", verdict))
        if tx_batches_path and os.path.exists(tx_batches_path):
            with open(tx_batches_path, encoding="utf-8") as f:
                b = json.load(f)
            if b.get("transactions"):
                print()
                print(f"The replica's transition batches (its /metrics, "
                      f"petstore_postgres_transition_batch_size, over the "
                      f"{b['runs']} runs): {b['decided']:,} transitions decided in "
                      f"{b['transactions']:,} transactions, "
                      f"{b['decided'] / b['transactions']:.1f} per transaction.")
        print()

    if not any(r["scenario"].endswith("_tx") for r in rows):
        return verdicts, failures
    print("The lists on the in-memory server, without and with a background "
          "client making transitions (medians of the rounds' ratios to the "
          "ruler):")
    print()
    print("| list | conns | quiet / ruler | target | with transitions / ruler "
          "| per-round | target | background 200s/s in the server runs |")
    print("|---|---:|---:|---|---:|---|---|---|")
    for quiet, busy in TX_LISTS:
        for c in sorted({r["conns"] for r in rows if r["scenario"] == busy}):
            q = median(paired(by_round(rows, quiet, c, "server"),
                              by_round(rows, quiet, c, "baseline")))
            srv = by_round(rows, busy, c, "server")
            per_round = paired(srv, by_round(rows, busy, c, "baseline"))
            b = median(per_round)
            summary = None
            path = os.path.join(backgrounds_dir or "", f"background-{busy}.json")
            if backgrounds_dir and os.path.exists(path):
                with open(path, encoding="utf-8") as f:
                    summary = json.load(f)
            rates = ([background_rate(summary, r) for r in srv.values()]
                     if summary else [])
            rates = [x for x in rates if x is not None]
            paced = bool(rates) and min(rates) >= thresholds.TX_PACE_KEPT * summary["rate"]
            qv = thresholds.at_least(q, thresholds.TX_QUIET_MIN)
            bv = thresholds.at_least(b, thresholds.TX_BUSY_MIN)
            if not paced:
                # Below pace, the figure would flatter the server.
                bv = "NOT MEASURED (background below pace)"
            verdicts.append((f"{SCENARIOS[quiet]} quiet, {c} connections", qv))
            verdicts.append((f"{SCENARIOS[busy]}, {c} connections", bv))
            print(f"| {SCENARIOS[quiet]} | {c} | {fmt(q)} | >= {thresholds.TX_QUIET_MIN} **{qv}** "
                  f"| {fmt(b)} | {' '.join(f'{x:.2f}' for x in per_round)} "
                  f"| >= {thresholds.TX_BUSY_MIN} **{bv}** "
                  f"| {' '.join(f'{x:.0f}' for x in rates) or 'n/a'} |")
    print()
    for _, busy in TX_LISTS:
        path = os.path.join(backgrounds_dir or "", f"background-{busy}.json")
        if not backgrounds_dir or not os.path.exists(path):
            continue
        with open(path, encoding="utf-8") as f:
            s = json.load(f)
        print(f"- background of {busy}: {s['ok']:,} transitions made in "
              f"{s['secs']:.0f} s ({s['ok'] / s['secs']:.0f}/s, paced at "
              f"{s['rate']:.0f}/s over {s['threads']} connections) on "
              f"{s['pets']:,} pets, {s['sell_share']:.0%} of them sells; "
              f"409s {s['conflicts']}, other statuses {s['other']}, "
              f"connection errors {s['errors']}, catch-ups {s['late']}")
        if s["other"] or s["errors"]:
            failures.append(f"background of {busy}: {s['other']} statuses "
                            f"{s['other_statuses']}, {s['errors']} connection errors")
    print()
    print("The background client runs through the server's and the ruler's "
          "runs alike (its CPU weighs on both); it reads every pet's status "
          "first, and each of its connections owns an equal share of them "
          "(every Nth in id order), picking one uniformly per request. Its rate in a server "
          "run counts its 200s inside that run's window.")
    print()
    return verdicts, failures


def memory_report(path, meta_path):
    failures = []
    with open(path, encoding="utf-8") as f:
        samples = [json.loads(line) for line in f if line.strip()]
    meta = {}
    if meta_path and os.path.exists(meta_path):
        with open(meta_path, encoding="utf-8") as f:
            meta = json.load(f)
    print()
    print(f"### Memory: {meta.get('pets', '?'):,} pets replayed, "
          f"{meta.get('secs', '?')} s mixed load at {meta.get('conns', '?')} "
          "connections")
    print()
    if "rss_after_start_kib" in meta:
        print(f"VmRSS after start (journal replayed): "
              f"{meta['rss_after_start_kib'] / 1024:.1f} MiB "
              f"({meta['rss_after_start_kib'] * 1024 / meta['pets']:.0f} "
              "bytes per pet)")
    mixed = []
    if meta.get("mixed_results") and os.path.exists(meta["mixed_results"]):
        with open(meta["mixed_results"], encoding="utf-8") as f:
            mixed = [json.loads(line) for line in f if line.strip()]
    if mixed and mixed[-1].get("missing"):
        failures.append("mixed memory load: wrk gave no result")
    elif mixed:
        m = mixed[-1]
        print(f"Mixed load: {m['rps']:.0f} req/s, p50 {m['p50_ms']:.2f} ms, "
              f"p99 {m['p99_ms']:.2f} ms, non-2xx {m['non2xx']}, "
              f"socket errors {m['socket_errors']}")
        if m["non2xx"] or m["socket_errors"]:
            failures.append(f"mixed memory load: {m['non2xx']} non-2xx, "
                            f"{m['socket_errors']} socket errors")
    print()
    print("| t (s) | VmRSS MiB | pets added |")
    print("|---:|---:|---:|")
    for s in samples:
        print(f"| {s['t']:.0f} | {s['rss_kib'] / 1024:.1f} | {s['added']} |")
    print()
    if len(samples) < 2:
        print("Too few samples for a growth figure.")
        return failures
    first, last = samples[0], samples[-1]
    added = last["added"]
    growth = (last["rss_kib"] - first["rss_kib"]) * 1024
    print(f"Pets added: {added} (final count {meta.get('pets', 0) + added:,}). "
          f"RSS growth: {growth / 2**20:+.1f} MiB over the run"
          + (f", {growth / added:.0f} bytes per added pet" if added else ""))
    # Steady state: from the first sample under load (connection buffers,
    # worker threads and allocator arenas are in place by then) to the end.
    if len(samples) >= 3 and last["added"] > samples[1]["added"]:
        s1 = samples[1]
        d_pets = last["added"] - s1["added"]
        d_rss = (last["rss_kib"] - s1["rss_kib"]) * 1024
        per_pet = d_rss / d_pets
        verdict = ("FLAT (growth explained by the added pets)"
                   if per_pet <= thresholds.LEAK_BYTES_PER_PET
                   else "GROWING FASTER THAN THE PETS: possible leak")
        print(f"Steady state (t={s1['t']:.0f} s to the end): "
              f"{d_rss / 2**20:+.1f} MiB for {d_pets} pets = "
              f"{per_pet:.0f} bytes per added pet (~100 expected, "
              f"<= {thresholds.LEAK_BYTES_PER_PET} called flat): **{verdict}**")
    elif added == 0:
        print("No pets were added: the growth is not explained by pets.")
    return failures


def keyed_report(results, memory):
    """LOAD_KEYED=1: per target, keyed POST's req/s over plain POST's in
    the same round (median of the rounds; target thresholds.KEYED_MIN),
    and the cost of a kept key, on stdout. Returns 3 when a run had errors
    or gave no result, else 0."""
    rows = read_rows(results)
    bad = [r for r in rows if r.get("missing") or r["non2xx"] or r["socket_errors"]]
    conns = rows[0]["conns"] if rows else 0
    print("| target | plain req/s | keyed req/s | keyed / plain (median of rounds) | "
          f"plain p99 ms | keyed p99 ms | target >= {thresholds.KEYED_MIN} |")
    print("|---|---|---|---|---|---|---|")
    for target in ("durable", "replica"):
        plain = by_round(rows, "post_plain", conns, target)
        keyed = by_round(rows, "post_keyed", conns, target)
        ratios = paired(keyed, plain)
        ratio = median(ratios)
        verdict = "n/a" if ratio is None else thresholds.at_least(ratio, thresholds.KEYED_MIN)
        print(f"| {target} | {fmt(median([r['rps'] for r in plain.values()]), 0)} | "
              f"{fmt(median([r['rps'] for r in keyed.values()]), 0)} | "
              f"{fmt(ratio)} ({', '.join(fmt(x) for x in ratios)}) | "
              f"{fmt(median([r['p99_ms'] for r in plain.values()]))} | "
              f"{fmt(median([r['p99_ms'] for r in keyed.values()]))} | {verdict} |")
    with open(memory, encoding="utf-8") as f:
        mem = json.load(f)
    n = mem["n"]
    plain_growth = (mem["rss1_kib"] - mem["rss0_kib"]) * 1024
    keyed_growth = (mem["rss2_kib"] - mem["rss1_kib"]) * 1024
    print()
    print(f"Memory (durable server, --fsync never): VmRSS {mem['rss0_kib'] // 1024} MiB "
          f"after start, +{plain_growth / n:.0f} bytes per unkeyed create, "
          f"+{keyed_growth / n:.0f} bytes per keyed create ({n} of each): "
          f"**{(keyed_growth - plain_growth) / n:.0f} bytes per kept key** "
          f"(gauge petstore_idempotency_keys_kept: {mem['kept_metric']}).")
    if mem["pg_rows"]:
        print(f"PostgreSQL: petstore_idempotency holds {mem['pg_rows']} rows in "
              f"{mem['pg_bytes'] / 1048576:.1f} MiB (heap and indexes): "
              f"**{mem['pg_bytes'] / mem['pg_rows']:.0f} bytes per kept key**.")
    if bad:
        print()
        print(f"ERRORS in {len(bad)} run(s): " + ", ".join(
            f"{r['scenario']} {r['target']} r{r['round']}" for r in bad))
        return 3
    return 0
