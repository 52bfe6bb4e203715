#!/usr/bin/env python3
"""Redis CPU per limiter state of limit.lua, and of variants of it that
each leave one piece of work out: where a state's cost goes in Redis.

    luacost.py LIMIT_LUA [VARIANT ...]

Variants (each made from LIMIT_LUA here, by replacing one line, but for
`tree` and `rev:REV`):
  tree       the script as it is
  rev:REV    the script at git revision REV, as it was (a change to the
             script measured against its previous version)
  base       the script with every SET's TTL fixed at 600 s, so that a
             variant that skips work does not let the states expire (the
             states would then come back unread, a cheaper path);
             the others are made from it
  call-only  returns once the names are checked: the call, its
             arguments and the script's start
  no-set     a state named alone is decided but not written back
  no-judge   each window's judgement replaced by constants
  no-reply   each request's packed reply replaced by a constant string

A private Redis (append-only file, fsync every second, as in production)
on a free loopback port; per variant, STATES states (24 a call, one
request each, calls pipelined 50 at a time) created once with FROM ""
(all three names), then taken in turn named alone (FROM "!") for CALLS
calls, ROUNDS times, the variants in a random order each round. Redis's
main-thread CPU (INFO cpu, user + sys) over the states decided: a count
of work, steadier than a throughput on a shared machine, though a round
still moves by about 10%, so each variant's figure is also divided by
the first variant's in the same round (the median of those ratios is the
comparison to read).
"""
import os
import random
import socket
import struct
import subprocess
import sys
import tempfile
import time

import redis

STATES, PER_CALL, CALLS, ROUNDS = 1000, 24, 2000, int(os.environ.get("LUA_COST_ROUNDS", "5"))

FIXED = "      local set = redis.pcall('SET', key, value, 'PX', 600000)"
CUTS = {
    "call-only": ("local out = { struct.pack('<i8', now) }",
                  "do return '' end\nlocal out = { struct.pack('<i8', now) }"),
    "no-set": (FIXED, FIXED.replace("local set = ", "local set = 'OK'\n      if from ~= NAMED_ALONE then set = ") + " end"),
    "no-reply": ("out[#out + 1] = struct.pack(REPLY, outcome, started, m1, m2, m3, mwait, d1, d2, d3, dwait, ends)",
                 "out[#out + 1] = string.rep('x', 74)"),
}


def replace_once(text, old, new):
    if text.count(old) != 1:
        sys.exit(f"lua-cost: the line to replace is not in the script once: {old.strip()}")
    return text.replace(old, new)


def variant(tree, name):
    if name.startswith("rev:"):
        # The script's folder was renamed (ratelimit/redis -> in_redis);
        # an older revision holds it at the old path.
        for folder in ("in_redis", "redis"):
            shown = subprocess.run(
                ["git", "show", name[4:] + f":petstore-server/src/ratelimit/{folder}/limit.lua"],
                capture_output=True, text=True)
            if shown.returncode == 0:
                break
        if shown.returncode != 0:
            sys.exit(f"lua-cost: {name}: {shown.stderr.strip()}")
        return shown.stdout
    if name == "tree":
        return tree
    base = replace_once(
        tree,
        "      local set = redis.pcall('SET', key, value, 'PX', int(math.max(keep - now + 1000, 1000)))",
        FIXED)
    if name == "base":
        return base
    if name == "no-judge":
        constants = "true, 5, now, 0, now + 10, 0, 0"
        base = replace_once(base, "= judge(mm, mf, mcap, MINUTE, now)", "= " + constants)
        return replace_once(base, "= judge(dm, df, dcap, DAY, now)", "= " + constants)
    if name not in CUTS:
        sys.exit(f"lua-cost: unknown variant {name}")
    return replace_once(base, *CUTS[name])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    tree = open(sys.argv[1]).read()
    names = sys.argv[2:] or ["base", "call-only", "no-set"]
    scripts = [variant(tree, n) for n in names]
    port = free_port()
    with tempfile.TemporaryDirectory() as d:
        server = subprocess.Popen(
            ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--dir", d, "--save", "",
             "--appendonly", "yes", "--appendfsync", "everysec"], stdout=subprocess.DEVNULL)
        try:
            r = redis.Redis(port=port)
            for _ in range(100):
                try:
                    r.ping()
                    break
                except redis.ConnectionError:
                    time.sleep(0.05)
            shas = [r.script_load(s) for s in scripts]

            def arg(from_):
                return struct.pack("<7q", 6000, 100000, 3, 60000, 600000, 1, 0) + from_

            def cpu():
                i = r.info("cpu")
                return i["used_cpu_user_main_thread"] + i["used_cpu_sys_main_thread"]

            def run(v, fresh):
                pipe = r.pipeline(transaction=False)
                k = 0
                for c in range(CALLS):
                    keys, args = [], [""]
                    for _ in range(PER_CALL):
                        name = "{%064x}:m6000/d100000:variant%d" % (k % STATES, v)
                        k += 1
                        if fresh:
                            keys += [name + ":v3", name + ":v2", name]
                            args.append(arg(b""))
                        else:
                            keys.append(name + ":v3")
                            args.append(arg(b"!"))
                    pipe.evalsha(shas[v], len(keys), *keys, *args)
                    if c % 50 == 49:
                        pipe.execute()
                pipe.execute()

            for v in range(len(shas)):
                run(v, True)
            got = {v: [] for v in range(len(shas))}
            for _ in range(ROUNDS):
                order = list(range(len(shas)))
                random.shuffle(order)
                for v in order:
                    c0 = cpu()
                    run(v, False)
                    got[v].append((cpu() - c0) * 1e6 / (CALLS * PER_CALL))
        finally:
            server.terminate()
            server.wait()
    def median(xs):
        return sorted(xs)[len(xs) // 2]

    # Paired: each round's figure over the first variant's in the same
    # round, whose noise (the machine's load then) both share.
    print("| variant | Redis CPU per state, median | x first, median of the rounds' ratios | rounds (us) |")
    print("|---|---:|---:|---|")
    first = got[0]
    for v, name in enumerate(names):
        xs = got[v]
        ratio = median([x / f for x, f in zip(xs, first)])
        print(f"| {name} | {median(xs):.2f} us | {ratio:.2f} | {' '.join(f'{x:.2f}' for x in xs)} |")


if __name__ == "__main__":
    main()
