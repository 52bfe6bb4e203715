"""Plots the dashboard's own queries (ops/grafana/petstore.json), asked of
the private Prometheus that scraped the server during scripts/bench/ops-picture's
run, and the throughput/latency curve of its phases.

    plot.py PROMETHEUS_URL DASHBOARD PHASES_JSON OUT_DASHBOARD_PNG OUT_CURVE_PNG

PHASES_JSON: [{"connections": C, "start": unix s, "end": unix s,
"client_p50_ms": wrk's p50, "client_p99_ms": wrk's p99}, ...].
The dashboard's variables are given their values over one server:
`$instance` matches every instance, `$__rate_interval` is 5s (Grafana's
rule with a 1 s scrape: four scrape intervals, and a little more).
"""

import json
import re
import sys
import urllib.parse
import urllib.request

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

RATE_INTERVAL = "5s"
# The panels drawn, by their titles in the dashboard: one of each row.
PANELS = [
    "Requests by route and status",
    "Latency p99 by route",
    "429 answers by reason",
    "Connections by protocol and TLS",
    "Journal fsync latency",
    "Journal group commits",
    "Process CPU",
    "Process memory",
]
CURVE_ROUTE = "/v1/pets/{petId}"


def query(prom, path, **params):
    url = f"{prom}/api/v1/{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, timeout=30) as resp:
        body = json.load(resp)
    if body.get("status") != "success":
        raise SystemExit(f"prometheus: {body}")
    return body["data"]["result"]


def substitute(expr):
    return expr.replace("$__rate_interval", RATE_INTERVAL).replace("$instance", ".*")


def legend(fmt, labels):
    return re.sub(r"\{\{\s*(\w+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt).strip()


def panels_by_title(dashboard):
    found = {}

    def walk(node):
        if isinstance(node, dict):
            if "targets" in node and "title" in node:
                found[node["title"]] = node
            for child in node.values():
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(dashboard)
    return found


def main():
    prom, dashboard_path, phases_path, out_dashboard, out_curve = sys.argv[1:6]
    with open(dashboard_path) as f:
        panels = panels_by_title(json.load(f))
    with open(phases_path) as f:
        phases = json.load(f)
    start, end = phases[0]["start"] - 5, phases[-1]["end"] + 2

    fig, axes = plt.subplots(2, 4, figsize=(20, 8.5))
    for ax, title in zip(axes.flat, PANELS):
        panel = panels[title]
        unit = panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short")
        for target in panel["targets"]:
            expr = substitute(target["expr"])
            for series in query(prom, "query_range", query=expr, start=start, end=end, step="1"):
                xs = [float(t) - phases[0]["start"] for t, _ in series["values"]]
                ys = [float(v) for _, v in series["values"]]
                if unit == "s":
                    ys = [y * 1000 for y in ys]
                if unit == "bytes":
                    ys = [y / 2**20 for y in ys]
                ax.plot(xs, ys, label=legend(target.get("legendFormat", ""), series["metric"]) or None)
        label = {"s": "ms", "bytes": "MiB", "reqps": "requests/s", "cps": "connections/s",
                 "percentunit": "share"}.get(unit, "")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("seconds into the run", fontsize=8)
        ax.set_ylabel(label, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6, loc="upper left")
        for phase in phases:
            ax.axvline(phase["start"] - phases[0]["start"], color="grey", lw=0.4, alpha=0.5)
    fig.suptitle("petstore dashboard queries over scripts/bench/ops-picture's run "
                 "(GET by id at 1, 2, 4, ... connections, creates and a banned key beside)",
                 fontsize=11)
    fig.tight_layout()
    fig.savefig(out_dashboard, dpi=80)

    # The curve: per phase, the route's rate and percentiles over the
    # phase (its first second left out), from the same metrics, beside
    # wrk's own percentiles: the server's histogram times a request from
    # its head to its response, so the queueing that grows with the
    # connections shows only in what the client waited.
    route = f'route="{CURVE_ROUTE}"'
    rows = []
    for phase in phases:
        window = f'{int(phase["end"] - phase["start"] - 1)}s'
        at = phase["end"]
        rate = query(prom, "query", time=at,
                     query=f"sum(rate(petstore_requests_total{{{route}}}[{window}]))")
        row = {"connections": phase["connections"],
               "rps": float(rate[0]["value"][1]) if rate else 0.0}
        for q in (0.5, 0.99):
            got = query(prom, "query", time=at, query=(
                f"histogram_quantile({q}, sum by (le) "
                f"(rate(petstore_request_duration_seconds_bucket{{{route}}}[{window}])))"))
            row[f"p{int(q * 100)}_ms"] = float(got[0]["value"][1]) * 1000 if got else float("nan")
        row["client_p50_ms"] = phase["client_p50_ms"]
        row["client_p99_ms"] = phase["client_p99_ms"]
        rows.append(row)
    print("connections  requests/s  server p50 ms  server p99 ms  wrk p50 ms  wrk p99 ms")
    for r in rows:
        print(f'{r["connections"]:>11}  {r["rps"]:>10.0f}  {r["p50_ms"]:>13.3f}  {r["p99_ms"]:>13.3f}'
              f'  {r["client_p50_ms"]:>10.3f}  {r["client_p99_ms"]:>10.3f}')
    fig, ax = plt.subplots(figsize=(7, 4.5))
    xs = [r["rps"] for r in rows]
    for key, name, style in (("client_p50_ms", "p50, client (wrk)", "o-"),
                             ("client_p99_ms", "p99, client (wrk)", "o-"),
                             ("p50_ms", "p50, server (histogram)", "s--"),
                             ("p99_ms", "p99, server (histogram)", "s--")):
        ax.plot(xs, [r[key] for r in rows], style, label=name)
    for r in rows:
        ax.annotate(f'{r["connections"]}c', (r["rps"], r["client_p99_ms"]), fontsize=7,
                    textcoords="offset points", xytext=(3, 3))
    ax.set_xlabel(f"requests/s, GET {CURVE_ROUTE}")
    ax.set_ylabel("latency, ms")
    ax.set_title("Throughput against latency, one phase per connection count", fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(out_curve, dpi=80)


if __name__ == "__main__":
    main()
