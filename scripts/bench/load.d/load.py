#!/usr/bin/env python3
"""The load benchmark's command line (Python 3 standard library only).

scripts/bench/load, the launcher, runs `help`, `plan` and then `run`;
the run starts `seed`, `background` and `memwatch` as processes of their
own; scripts/bench/profile and load-h2 use `journal`, `capture` and
`drive`; `report` and `keyed-report` print the report of kept results
again.

  help                         the switches and the examples (--help)
  plan                         the switches the launcher needs, as shell
                               assignments; fails on switches it refuses
  run ...                      the benchmark (run.py)
  seed BASE KEY N THREADS      POST N pets (a third of each status, or all
                               of --status), keep-alive; with --keyed
                               PREFIX, each with Idempotency-Key PREFIX-i
  background ...               paced transitions on pets spread over the
                               whole inventory while a scenario runs
  memwatch ...                 sample VmRSS and the pet count while a load runs
  journal PATH N               write a durable journal of N pets
  capture BASE KEY PATH OUT    write one response as sent (the ruler's)
  drive BASE KEY METHOD PATH N send N requests on one keep-alive connection
  report RESULTS ...           print the Markdown tables; exit 3 on any error
  keyed-report RESULTS ...     keyed POST against unkeyed (LOAD_KEYED=1)

Everything talks to 127.0.0.1 only.
"""

import argparse
import os
import shlex
import sys

import clients
import report
import run
import switches


def plan(_args):
    try:
        s = switches.read(os.environ)
    except switches.SwitchError as e:
        print(f"== load: FAILED: {e}", file=sys.stderr)
        return 1
    print(f"skip_build={int(s.skip_build)}")
    print(f"before={shlex.quote(s.before)}")
    print(f"replicas={int(s.replicas)}")
    print(f"keyed={int(s.keyed)}")
    return 0


def show_help(_args):
    sys.stdout.write(switches.help_text())
    return 0


def seed(a):
    print(clients.seed(a.base, a.key, a.n, a.threads, a.status, a.keyed))
    return 0


def background(a):
    line, clean = clients.background(a.base, a.key, a.rate, a.threads, a.sell_share,
                                     a.duration, a.ready_file, a.stop_file, a.out)
    print(line)
    return 0 if clean else 3


def memwatch(a):
    clients.memwatch(a.pid, a.base, a.key, a.start_id, a.interval, a.duration,
                     a.ready_file, a.stop_file, a.out, lambda line: print(line, flush=True))
    return 0


def journal(a):
    print(clients.journal(a.path, a.n))
    return 0


def capture(a):
    print(clients.capture(a.base, a.key, a.path, a.out, a.method))
    return 0


def drive(a):
    clients.drive(a.base, a.key, a.method, a.path, a.n, a.ids)
    return 0


def print_report(a):
    return report.report(a.results, memory=a.memory, memory_meta=a.memory_meta,
                         batches=a.batches, redis_batches=a.redis_batches,
                         backgrounds=a.backgrounds, tx_batches=a.tx_batches)


def print_keyed_report(a):
    return report.keyed_report(a.results, a.memory)


def parser():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawTextHelpFormatter)
    sub = p.add_subparsers(dest="cmd", required=True)

    sub.add_parser("help").set_defaults(func=show_help)
    sub.add_parser("plan").set_defaults(func=plan)

    s = sub.add_parser("run", help="the benchmark, with what the launcher made")
    s.add_argument("--server-bin", required=True)
    s.add_argument("--baseline-bin", required=True)
    s.add_argument("--before-bin", default="", help="LOAD_BEFORE's server")
    s.add_argument("--pg-bin", default="", help="PostgreSQL's binaries (LOAD_REPLICAS, LOAD_KEYED)")
    s.add_argument("--pg-dir", default="", help="its directory, for lib.sh's stop_postgres")
    s.add_argument("--pg-url", default="")
    s.add_argument("--redis-port", type=int, default=0, help="the private Redis (LOAD_REPLICAS)")
    s.add_argument("--redis-pid", type=int, default=0)
    s.set_defaults(func=run.main)

    s = sub.add_parser("seed")
    s.add_argument("base")
    s.add_argument("key")
    s.add_argument("n", type=int)
    s.add_argument("threads", type=int)
    s.add_argument("--status", choices=clients.STATUSES)
    s.add_argument("--keyed", metavar="PREFIX")
    s.set_defaults(func=seed)

    s = sub.add_parser("background")
    s.add_argument("--base", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--rate", type=float, required=True)
    s.add_argument("--threads", type=int, default=8)
    s.add_argument("--sell-share", type=float, default=0.02)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--ready-file", required=True)
    s.add_argument("--stop-file", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=background)

    s = sub.add_parser("memwatch")
    s.add_argument("--pid", type=int, required=True)
    s.add_argument("--base", required=True)
    s.add_argument("--key", required=True)
    s.add_argument("--start-id", type=int, required=True)
    s.add_argument("--interval", type=float, default=5)
    s.add_argument("--duration", type=float, required=True)
    s.add_argument("--stop-file", required=True)
    s.add_argument("--ready-file", required=True)
    s.add_argument("--out", required=True)
    s.set_defaults(func=memwatch)

    s = sub.add_parser("journal")
    s.add_argument("path")
    s.add_argument("n", type=int)
    s.set_defaults(func=journal)

    s = sub.add_parser("capture")
    s.add_argument("base")
    s.add_argument("key")
    s.add_argument("path")
    s.add_argument("out")
    s.add_argument("--method", choices=["GET", "POST"], default="GET")
    s.set_defaults(func=capture)

    s = sub.add_parser("drive")
    s.add_argument("base")
    s.add_argument("key")
    s.add_argument("method", choices=["GET", "POST"])
    s.add_argument("path")
    s.add_argument("n", type=int)
    s.add_argument("--ids", type=int, default=10000)
    s.set_defaults(func=drive)

    s = sub.add_parser("report")
    s.add_argument("results")
    s.add_argument("--batches", help="replica POST's creates and transactions (LOAD_REPLICAS)")
    s.add_argument("--redis-batches",
                   help="replica + Redis: requests decided in Redis and calls (LOAD_REPLICAS)")
    s.add_argument("--memory")
    s.add_argument("--memory-meta")
    s.add_argument("--backgrounds",
                   help="the directory of background-*.json (LOAD_TRANSITIONS)")
    s.add_argument("--tx-batches",
                   help="the replica's transitions decided and transactions "
                        "(LOAD_REPLICAS with LOAD_TRANSITIONS)")
    s.set_defaults(func=print_report)

    s = sub.add_parser("keyed-report")
    s.add_argument("results")
    s.add_argument("--memory", required=True)
    s.set_defaults(func=print_keyed_report)
    return p


def main():
    args = parser().parse_args()
    try:
        return args.func(args)
    except clients.ClientError as e:
        print(e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
