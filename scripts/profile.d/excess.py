#!/usr/bin/env python3
"""Where the server's instructions per request go beyond the baseline's.

    excess.py SERVER_PREFIX BASELINE_PREFIX N [ROWS]

Reads PREFIX.N and PREFIX.3N (callgrind output files of scripts/profile),
takes each function's self cost per request as (cost at 3N - cost at N) /
2N, and prints a Markdown table of the functions by how many more
instructions a request spends in them in the server than in the baseline.
Python 3 standard library and callgrind_annotate only.
"""

import collections
import re
import subprocess
import sys

LINE = re.compile(r"\s*([\d,]+)\s+\(\s*[\d.]+%\)\s+(.*)$")


def self_costs(path):
    out = subprocess.run(
        ["callgrind_annotate", "--auto=no", "--threshold=100", path],
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


def per_request(prefix, n):
    one, three = self_costs(f"{prefix}.{n}"), self_costs(f"{prefix}.{3 * n}")
    return {k: (three[k] - one.get(k, 0)) / (2 * n) for k in three}


def main():
    server_prefix, baseline_prefix, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rows = int(sys.argv[4]) if len(sys.argv) > 4 else 25
    server, baseline = per_request(server_prefix, n), per_request(baseline_prefix, n)
    print(f"Self instructions per request: server {sum(server.values()):,.0f}, "
          f"baseline {sum(baseline.values()):,.0f}.\n")
    print("| excess | server | baseline | function |\n|---:|---:|---:|---|")
    excess = sorted(((server.get(k, 0) - baseline.get(k, 0), k)
                     for k in set(server) | set(baseline)), reverse=True)
    for diff, name in excess[:rows]:
        name = name.replace("|", "\\|")
        print(f"| {diff:,.0f} | {server.get(name, 0):,.0f} | "
              f"{baseline.get(name, 0):,.0f} | `{name[:120]}` |")


if __name__ == "__main__":
    main()
