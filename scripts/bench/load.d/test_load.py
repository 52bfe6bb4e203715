"""Unit tests of the load benchmark's switches, thresholds, records and
report: what a run is judged by, without running one. Standard library
only, about a second:

    python3 -m unittest discover -s scripts/bench/load.d
"""

import contextlib
import io
import json
import os
import re
import tempfile
import unittest
from pathlib import Path

import report
import run
import switches
import thresholds

DOCS = Path(__file__).resolve().parents[3] / "docs" / "load.md"


def read(**env):
    return switches.read({k: str(v) for k, v in env.items()})


class Switches(unittest.TestCase):
    def test_defaults(self):
        s = read()
        self.assertEqual((s.secs, s.rounds, s.mixed_secs, s.conns), (3, 5, 60, (64, 256)))
        self.assertFalse(s.quick or s.replicas or s.transitions or s.keyed or s.observability)
        self.assertEqual(s.before, "")

    def test_quick_defaults_and_an_explicit_switch_beside_them(self):
        s = read(LOAD_QUICK=1, LOAD_SECS=4)
        self.assertEqual((s.secs, s.rounds, s.mixed_secs, s.conns), (4, 1, 10, (64,)))

    def test_an_empty_switch_counts_as_unset(self):
        self.assertEqual(read(LOAD_SECS="", LOAD_CONNECTIONS="").conns, (64, 256))

    def test_refusals(self):
        cases = [
            (dict(LOAD_SECS=0), "LOAD_SECS, LOAD_ROUNDS and LOAD_MIXED_SECS must be positive integers"),
            (dict(LOAD_ROUNDS="x"), "must be positive integers"),
            (dict(LOAD_CONNECTIONS="64 1"), "LOAD_CONNECTIONS: 1 is not a count in 2..1000"),
            (dict(LOAD_CONNECTIONS=1001), "1001 is not a count"),
            (dict(LOAD_REPLICAS=1, LOAD_CONNECTIONS=256),
             "LOAD_REPLICAS=1 measures at 64 connections: LOAD_CONNECTIONS must include 64"),
            (dict(LOAD_KEYED=1, LOAD_KEYED_N=0), "LOAD_KEYED_N must be a positive integer"),
            (dict(LOAD_ROUNDS=10),
             "these knobs would run about 960 s; the run is bounded to under 10 minutes"),
            (dict(LOAD_REPLICAS=1), "the run is bounded to under 12 minutes"),
            (dict(LOAD_SECS=61, LOAD_ROUNDS=1, LOAD_CONNECTIONS=64), "bounded"),
        ]
        for env, message in cases:
            with self.subTest(env=env):
                with self.assertRaises(switches.SwitchError) as e:
                    read(**env)
                self.assertIn(message, str(e.exception))

    def test_estimate_and_bound(self):
        s = read()
        self.assertEqual(s.runs(), 120)
        self.assertEqual(s.estimate(), 540)
        self.assertEqual(s.bound(), 570)
        both = read(LOAD_REPLICAS=1, LOAD_TRANSITIONS=1, LOAD_ROUNDS=3, LOAD_CONNECTIONS=64)
        self.assertEqual(both.runs(), 108)
        self.assertEqual(both.bound(), 900)
        # Observability fits the default counts with four rounds, not five.
        read(LOAD_OBSERVABILITY=1, LOAD_ROUNDS=4)
        with self.assertRaises(switches.SwitchError):
            read(LOAD_OBSERVABILITY=1)

    def test_every_example_runs_within_the_bound(self):
        for command, _, _ in switches.EXAMPLES:
            with self.subTest(command=command):
                switches.read(switches.example_env(command))

    def test_help_names_every_switch_and_example(self):
        text = switches.help_text()
        for name, *_ in switches.SWITCHES:
            self.assertIn(name, text)
        for command, _, takes in switches.EXAMPLES:
            self.assertIn(command, text)
            if takes:
                self.assertIn(takes, text)


class Docs(unittest.TestCase):
    """docs/load.md and switches.py say the same; the run times only in
    the latter."""

    def setUp(self):
        self.text = DOCS.read_text(encoding="utf-8")

    def test_the_switch_table_matches(self):
        documented = {}
        for line in self.text.splitlines():
            cells = [c.strip().strip("`") for c in line.split("|")[1:-1]]
            if len(cells) == 4 and re.fullmatch(r"LOAD_[A-Z_]+", cells[0]):
                documented[cells[0]] = (cells[1], cells[2])
        expected = {name: (default, quick or "") for name, default, quick, _ in switches.SWITCHES}
        self.assertEqual(documented, expected)

    def test_the_examples_match_and_state_no_run_time(self):
        block = self.text.split("```sh\n", 1)[1].split("```", 1)[0]
        commands = [line.split("  #", 1)[0].strip() for line in block.splitlines()]
        self.assertEqual([c for c in commands if c != "scripts/bench/load --help"],
                         [c for c, _, _ in switches.EXAMPLES])
        self.assertNotIn("minute", block)


class Thresholds(unittest.TestCase):
    def test_single_node_at_the_edges(self):
        v = thresholds.single_node_verdict
        self.assertEqual(v("list", 0.85, 1.5), ("ratio >= 0.85, p99 ratio <= 1.5", "MET"))
        self.assertEqual(v("list", 0.849, 1.0)[1], "MISSED")
        self.assertEqual(v("list_sold", 0.9, 1.51)[1], "MISSED")
        self.assertEqual(v("list", 0.9, None)[1], "MISSED")
        self.assertEqual(v("get_id", 0.9, 9.0), ("ratio >= 0.9", "MET"))
        self.assertEqual(v("post_mem", 0.69, None), ("ratio >= 0.7", "MISSED"))
        self.assertEqual(v("post_mem", None, None)[1], "MISSED")
        self.assertEqual(v("post_durable", 0.1, 9.0), ("(none)", None))

    def test_at_least(self):
        self.assertEqual(thresholds.at_least(0.5, 0.5), "MET")
        self.assertEqual(thresholds.at_least(0.49, 0.5), "MISSED")
        self.assertEqual(thresholds.at_least(None, 0.5), "MISSED")

    def test_the_summary_names_the_table(self):
        self.assertEqual(
            thresholds.single_node_summary(),
            "list (with and without filter) >= 0.85 of baseline req/s and p99 <= 1.5x "
            "baseline's; get by id >= 0.9; POST in memory >= 0.7; POST durable: no target.")


def stats(requests=30000, status_errors=0, read_errors=0, extra=""):
    return ('LOADSTATS {"requests":%d,"duration_us":3000000,"bytes":1,"status_errors":%d,'
            '"connect_errors":0,"read_errors":%d,"write_errors":0,"timeout_errors":0,'
            '"p50_us":1000,"p90_us":2000,"p99_us":4000,"max_us":9000,"mean_us":1200.0%s}\n'
            % (requests, status_errors, read_errors, extra))


class Record(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def log(self, text):
        path = os.path.join(self.dir.name, "run.log")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return path

    def test_wrk(self):
        row, line = report.record("wrk", self.log("noise\n" + stats(read_errors=2)), "list", 64,
                                  "server", 3, 150, 100, 0, 1.0, 4.0)
        self.assertEqual(row["rps"], 10000)
        self.assertEqual((row["p50_ms"], row["p99_ms"]), (1.0, 4.0))
        self.assertEqual(row["socket_errors"], 2)
        self.assertAlmostEqual(row["cpu_per_100k"], 5.0)
        self.assertEqual((row["started"], row["ended"]), (1.0, 4.0))
        self.assertTrue(line.startswith("list          c=64   server   r3:     10000 req/s"))

    def test_transitions_count_their_200s_apart(self):
        row, line = report.record(
            "wrk", self.log(stats(extra=',"ok":600,"conflicts":4,"other_status":0')),
            "post_durable", 64, "transitions", 1, 0, 100, 0)
        self.assertEqual((row["ok"], row["conflicts"], row["ok_per_s"]), (600, 4, 200))
        self.assertIn("transitions 200/s, 409s 4", line)

    def test_no_result(self):
        row, line = report.record("wrk", self.log("wrk: connection refused\n"), "list", 64,
                                  "server", 1, 0, 100, 1)
        self.assertTrue(row["missing"])
        self.assertIn("NO RESULT (exit 1;", line)

    def test_pgbench_and_redis_benchmark(self):
        row, _ = report.record("pgbench", self.log(
            "number of transactions actually processed: 2400\n"
            "latency average = 80.5 ms\ntps = 795.3 (without initial connection time)\n"),
            "post_mem", 64, "pgbench", 1, 0, 100, 0)
        self.assertEqual((row["rps"], row["requests"], row["avg_ms"]), (795.3, 2400, 80.5))
        row, _ = report.record("redis", self.log(
            '"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms",'
            '"p95_latency_ms","p99_latency_ms","max_latency_ms"\n'
            '"EVALSHA","120000.5","0.5","0.1","0.4","0.9","1.2","3.0"\n'),
            "list", 64, "redis_ceiling", 1, 50, 100, 0)
        self.assertEqual((row["rps"], row["p99_ms"]), (120000.5, 1.2))
        row, _ = report.record("pgbench", self.log("tps = 1\n"), "post_mem", 64, "pgbench",
                               1, 0, 100, 0)
        self.assertTrue(row["missing"])


def wrk_row(scenario, target, rnd, rps, conns=64, non2xx=0, socket_errors=0, p99=4.0, **more):
    row = {"scenario": scenario, "conns": conns, "target": target, "round": rnd,
           "log": f"{scenario}-{target}-r{rnd}.log", "wrk_status": 0, "kind": "wrk",
           "requests": int(rps * 3), "rps": rps, "p50_ms": 1.0, "p99_ms": p99,
           "non2xx": non2xx, "socket_errors": socket_errors, "socket_detail": {},
           "cpu_s": 1.0, "cpu_per_100k": 2.0}
    row.update(more)
    return row


class Report(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.addCleanup(self.dir.cleanup)

    def path(self, name, rows=None, obj=None):
        p = os.path.join(self.dir.name, name)
        with open(p, "w", encoding="utf-8") as f:
            if rows is not None:
                f.writelines(json.dumps(r) + "\n" for r in rows)
            else:
                json.dump(obj, f)
        return p

    def render(self, function, *args, **kwargs):
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = function(*args, **kwargs)
        return status, out.getvalue()

    def single_node(self, list_ratio, get_ratio=1.0, post_ratio=1.0, p99_ratio=1.0):
        rows = []
        for r in (1, 2, 3):
            for scenario, ratio in (("list", list_ratio), ("get_id", get_ratio),
                                    ("post_mem", post_ratio), ("post_durable", 0.1)):
                rows.append(wrk_row(scenario, "server", r, 10000 * ratio, p99=4.0 * p99_ratio))
                rows.append(wrk_row(scenario, "baseline", r, 10000))
        return rows

    def test_every_target_met(self):
        status, text = self.render(report.report, self.path("r.jsonl", self.single_node(0.9)))
        self.assertEqual(status, 0)
        self.assertIn("| GET /v1/pets?limit=20 | 64 | 9000 | 10000 | 0.90 | 0.90 0.90 0.90 |", text)
        self.assertIn("| POST /v1/pets (durable, fsync always) | 64 |", text)
        self.assertIn("Targets: 3 of 3 MET:", text)
        self.assertIn("No errors: every run had zero non-2xx responses", text)

    def test_missed_targets_are_reported_not_errors(self):
        rows = self.single_node(0.84, get_ratio=0.95, p99_ratio=1.0)
        status, text = self.render(report.report, self.path("r.jsonl", rows))
        self.assertEqual(status, 0)
        self.assertIn("Targets: 2 of 3 MET:", text)
        self.assertIn("- MISSED: GET /v1/pets?limit=20 at 64 connections", text)

    def test_a_slow_p99_misses_the_list(self):
        status, text = self.render(report.report,
                                   self.path("r.jsonl", self.single_node(1.0, p99_ratio=1.6)))
        self.assertIn("| ratio >= 0.85, p99 ratio <= 1.5 | **MISSED** |", text)

    def test_errors_fail_the_run(self):
        rows = self.single_node(1.0)
        rows.append(wrk_row("list", "server", 4, 100, non2xx=3))
        rows.append(dict(wrk_row("get_id", "server", 4, 0), missing=True, wrk_status=124))
        status, text = self.render(report.report, self.path("r.jsonl", rows))
        self.assertEqual(status, 3)
        self.assertIn("FAIL: list c=64 server round 4: 3 non-2xx, 0 socket errors", text)
        self.assertIn("FAIL: get_id c=64 server round 4: wrk gave no result (exit 124", text)
        self.assertIn("FAIL: 2 run(s) with errors", text)

    def test_replicas(self):
        rows = self.single_node(1.0)
        for r in (1, 2, 3):
            rows += [wrk_row("list", "replica", r, 9100), wrk_row("list", "replica_redis", r, 3900),
                     wrk_row("get_id", "replica", r, 8000),
                     wrk_row("post_mem", "replica", r, 10000), wrk_row("post_mem", "durable", r, 5000),
                     dict(wrk_row("post_mem", "pgbench", r, 1000), kind="pgbench", avg_ms=5.0)]
        status, text = self.render(report.report, self.path("r.jsonl", rows))
        self.assertEqual(status, 0)
        self.assertIn("| replica list / single-node list | 0.91 0.91 0.91 | 0.91 | >= 0.9 | **MET** |", text)
        self.assertIn("| replica get / single-node get | 0.80 0.80 0.80 | 0.80 | >= 0.9 | **MISSED** |", text)
        self.assertIn("| replica POST / pgbench, one transaction per create | 10.00 10.00 10.00 | 10.00 | >= 10 | **MET** |", text)
        self.assertIn("| replica + Redis list / single-node list | 0.39 0.39 0.39 | 0.39 | >= 0.4 | **MISSED** |", text)
        self.assertIn("Replica targets (LOAD_REPLICAS): 3 of 5 MET.", text)

    def test_a_list_under_transitions_below_pace_is_not_measured(self):
        rows = self.single_node(1.0)
        t = 1_800_000_000.0
        for r in (1, 2):
            for scenario in ("list_available", "list_tx"):
                rows.append(wrk_row(scenario, "server", r, 9000, started=t + 10 * r, ended=t + 10 * r + 2))
                rows.append(wrk_row(scenario, "baseline", r, 10000))
        ok = [[tenth, 85] for tenth in range(int(t * 10), int((t + 40) * 10))]
        self.path("background-list_tx.json", obj={
            "ok": 1, "conflicts": 0, "other": 0, "errors": 0, "late": 0, "rate": 1000,
            "secs": 40, "pets": 10000, "sell_share": 0.02, "threads": 8,
            "other_statuses": [], "ok_by_tenth": ok})
        status, text = self.render(report.report, self.path("r.jsonl", rows),
                                   backgrounds=self.dir.name)
        self.assertEqual(status, 0)
        self.assertIn(">= 0.8 **NOT MEASURED (background below pace)** | 850 850 |", text)
        # At 900 a second, the pace is kept and the list is judged.
        for entry in ok:
            entry[1] = 90
        self.path("background-list_tx.json", obj={
            "ok": 1, "conflicts": 0, "other": 0, "errors": 0, "late": 0, "rate": 1000,
            "secs": 40, "pets": 10000, "sell_share": 0.02, "threads": 8,
            "other_statuses": [], "ok_by_tenth": ok})
        _, text = self.render(report.report, self.path("r.jsonl", rows),
                              backgrounds=self.dir.name)
        self.assertIn("| 0.90 | 0.90 0.90 | >= 0.8 **MET** | 900 900 |", text)
        self.assertIn("| GET /v1/pets?limit=20 | 64 | 1.00 | >= 0.95 **MET** |", text)

    def memory(self, per_pet):
        samples = [{"t": 0, "rss_kib": 100000, "added": 0}, {"t": 5, "rss_kib": 101000, "added": 1000}]
        samples.append({"t": 10, "rss_kib": 101000 + per_pet * 10240 // 1024, "added": 11240})
        mixed = self.path("mixed.jsonl", [wrk_row("mixed", "server", 1, 20000)])
        meta = self.path("meta.json", obj={"pets": 1000000, "secs": 10, "conns": 64,
                                           "rss_after_start_kib": 100000, "mixed_results": mixed})
        return self.render(report.report, self.path("r.jsonl", self.single_node(1.0)),
                           memory=self.path("m.jsonl", samples), memory_meta=meta)

    def test_memory_flat_and_growing(self):
        status, text = self.memory(400)
        self.assertEqual(status, 0)
        self.assertIn("= 400 bytes per added pet (~100 expected, <= 400 called flat): **FLAT", text)
        _, text = self.memory(500)
        self.assertIn("**GROWING FASTER THAN THE PETS: possible leak**", text)

    def test_keyed(self):
        rows = []
        for r in (1, 2, 3):
            for target, keyed in (("durable", 8000), ("replica", 7900)):
                rows.append(wrk_row("post_plain", target, r, 10000))
                rows.append(wrk_row("post_keyed", target, r, keyed))
        memory = self.path("k.json", obj={"n": 1000, "rss0_kib": 1000, "rss1_kib": 2000,
                                          "rss2_kib": 3250, "kept_metric": "1000",
                                          "pg_rows": 1000, "pg_bytes": 283000})
        status, text = self.render(report.keyed_report, self.path("r.jsonl", rows), memory)
        self.assertEqual(status, 0)
        self.assertIn("| durable | 10000 | 8000 | 0.80 (0.80, 0.80, 0.80) | 4.00 | 4.00 | MET |", text)
        self.assertIn("| replica | 10000 | 7900 | 0.79 (0.79, 0.79, 0.79) | 4.00 | 4.00 | MISSED |", text)
        self.assertIn("**256 bytes per kept key**", text)
        self.assertIn("**283 bytes per kept key**", text)
        rows.append(wrk_row("post_keyed", "replica", 4, 1, socket_errors=1))
        status, text = self.render(report.keyed_report, self.path("r.jsonl", rows), memory)
        self.assertEqual(status, 3)
        self.assertIn("ERRORS in 1 run(s): post_keyed replica r4", text)


class Plan(unittest.TestCase):
    def test_a_scenarios_runs_in_order(self):
        steps = list(run.scenario_steps((64, 256), 2, page_only_at=64, before=True,
                                        extra=("replica", "pgbench"), hook=True))
        self.assertEqual(steps[:7], [
            (64, 1, "server"), (64, 1, "baseline"), (64, 1, "page_only"), (64, 1, "before"),
            (64, 1, run.HOOK), (64, 1, "replica"), (64, 1, "pgbench")])
        # The rulers of the first count and the replicas' targets (at 64)
        # are not run at 256.
        self.assertEqual(steps[14:], [
            (256, 1, "server"), (256, 1, "baseline"), (256, 1, run.HOOK),
            (256, 2, "server"), (256, 2, "baseline"), (256, 2, run.HOOK)])

    def test_the_estimate_counts_the_default_plan(self):
        # The default plan: 5 scenarios at two counts, and page_only in
        # the 4 of them that have one at the first count.
        s = read()
        steps = [step for name in ("list", "list_sold", "get_id", "post_mem")
                 for step in run.scenario_steps(s.conns, s.rounds, page_only_at=s.conns[0])]
        steps += list(run.scenario_steps(s.conns, s.rounds))
        self.assertEqual(len(steps), s.runs())


if __name__ == "__main__":
    unittest.main()
