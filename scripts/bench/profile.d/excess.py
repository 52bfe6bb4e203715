#!/usr/bin/env python3
"""Where the server's instructions per request go beyond the baseline's.

    excess.py [--inclusive] [--ruler=NAME] [--subject=NAME] SERVER_PREFIX BASELINE_PREFIX N [ROWS]

Reads PREFIX.N and PREFIX.3N (callgrind output files of scripts/bench/profile),
takes each function's self cost per request as (cost at 3N - cost at N) /
2N, and prints a Markdown table of the functions by how many more
instructions a request spends in them in the server than in the baseline.
With --inclusive, each function's inclusive cost instead (itself and what
it calls): where in the call tree the excess starts, where the self table
says where it ends up. --ruler names the second column (default
baseline), --subject the first (default server: another ruler can stand
there, to split a ruler's own cost). Python 3 standard library and callgrind_annotate only.
"""

import collections
import re
import subprocess
import sys

LINE = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$")


def self_costs(path, inclusive=False):
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100",
         f"--inclusive={'yes' if inclusive else 'no'}", path],
        capture_output=True, text=True, check=True).stdout
    costs = collections.Counter()
    started = False
    for line in out.splitlines():
        if "file:function" in line:
            started = True
            continue
        m = LINE.match(line) if started else None
        if not m:
            continue
        name = m.group(2)
        function = name.split(":", 1)[1] if ":" in name else name
        function = re.sub(r" \[.*\]$", "", function)
        function = re.sub(r" \([\d,]+x\)$", "", function)
        costs[function] += int(m.group(1).replace(",", ""))
    return costs


def per_request(prefix, n, inclusive=False):
    one = self_costs(f"{prefix}.{n}", inclusive)
    three = self_costs(f"{prefix}.{3 * n}", inclusive)
    return {k: (three[k] - one.get(k, 0)) / (2 * n) for k in three}


def main():
    args = sys.argv[1:]
    inclusive, ruler, subject = False, "baseline", "server"
    while args and args[0].startswith("--"):
        flag = args.pop(0)
        if flag == "--inclusive":
            inclusive = True
        elif flag.startswith("--ruler="):
            ruler = flag.split("=", 1)[1]
        elif flag.startswith("--subject="):
            subject = flag.split("=", 1)[1]
        else:
            raise SystemExit(f"unknown flag {flag}")
    server_prefix, baseline_prefix, n = args[0], args[1], int(args[2])
    rows = int(args[3]) if len(args) > 3 else 25
    server = per_request(server_prefix, n, inclusive)
    baseline = per_request(baseline_prefix, n, inclusive)
    if not inclusive:
        # Inclusive costs overlap (a caller holds its callees'): no sum.
        print(f"Self instructions per request: {subject} {sum(server.values()):,.0f}, "
              f"{ruler} {sum(baseline.values()):,.0f}.\n")
    print(f"| excess | {subject} | {ruler} | function |\n|---:|---:|---:|---|")
    excess = sorted(((server.get(k, 0) - baseline.get(k, 0), k)
                     for k in set(server) | set(baseline)), reverse=True)
    for diff, name in excess[:rows]:
        name = name.replace("|", "\\|")
        print(f"| {diff:,.0f} | {server.get(name, 0):,.0f} | "
              f"{baseline.get(name, 0):,.0f} | `{name[:120]}` |")


if __name__ == "__main__":
    main()
