"""The load benchmark's HTTP clients and its journal writer (Python's
standard library only): what seeds, counts, captures and drives the
servers under test, and the background clients that run beside wrk.

Each function returns what it has to say, or raises ClientError; the
command line (load.py) and the run (run.py) decide where it goes.
Everything talks to 127.0.0.1 only.
"""

import http.client
import json
import os
import random
import re
import threading
import time
import urllib.parse
import zlib

STATUSES = ("available", "pending", "sold")


class ClientError(Exception):
    """A request that did not get the answer the benchmark relies on."""


def connect(base):
    url = urllib.parse.urlsplit(base)
    if url.hostname != "127.0.0.1":
        raise ClientError(f"refusing a non-loopback address: {base}")
    return http.client.HTTPConnection(url.hostname, url.port, timeout=30)


# --- seeding and counting ---------------------------------------------------

def seed(base, key, n, threads, status=None, keyed=None):
    """POST N pets over THREADS keep-alive connections; pet i (0-based)
    gets status STATUSES[i % 3], so each status gets a third, or STATUS;
    with KEYED, each with Idempotency-Key KEYED-i."""
    errors = []
    counter = {"done": 0}
    lock = threading.Lock()

    def worker(first):
        conn = connect(base)
        headers = {
            "Authorization": f"Bearer {key}",
            "Content-Type": "application/json",
        }
        for i in range(first, n, threads):
            body = json.dumps(
                {"name": f"seed-{i + 1:06}", "categoryId": i % 10 + 1,
                 "status": status or STATUSES[i % 3]},
                separators=(",", ":"))
            if keyed:
                headers["Idempotency-Key"] = f"{keyed}-{i}"
            conn.request("POST", "/v1/pets", body=body, headers=headers)
            response = conn.getresponse()
            response.read()
            if response.status != 201:
                with lock:
                    errors.append(response.status)
                if len(errors) > 10:
                    return
        with lock:
            counter["done"] += 1
        conn.close()

    started = time.monotonic()
    workers = [threading.Thread(target=worker, args=(t,), daemon=True)
               for t in range(threads)]
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    if errors:
        raise ClientError(f"seeding failed: statuses {errors[:10]}")
    elapsed = time.monotonic() - started
    return f"seeded {n} pets in {elapsed:.1f} s ({n / elapsed:.0f} pets/s)"


def count_after(conn, key, after):
    """Pets with an id above AFTER, paging with `after` (ids ascend);
    and the last id seen."""
    total = 0
    last = after
    while True:
        path = "/v1/pets?limit=100" + (f"&after={last}" if last > 0 else "")
        conn.request("GET", path,
                     headers={"Authorization": f"Bearer {key}"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise ClientError(f"GET /v1/pets?after={last}: {response.status}")
        page = json.loads(body)
        total += len(page)
        if not page or response.getheader("Link") is None:
            return total, (page[-1]["id"] if page else last)
        last = page[-1]["id"]


def count(base, key, after):
    """How many pets have an id above AFTER."""
    conn = connect(base)
    n, _ = count_after(conn, key, after)
    return n


# --- one request, for the rulers and for callgrind ---------------------------

# The pet every profiled POST sends (drive, capture).
PROFILED_PET = b'{"name":"profiled","categoryId":3,"status":"sold"}'


def request_parts(key, method):
    """The headers and body of a profiled request: the key, and for POST
    the fixed pet."""
    headers = {"Authorization": f"Bearer {key}"}
    if method != "POST":
        return headers, None
    headers["Content-Type"] = "application/json"
    return headers, PROFILED_PET


def drive(base, key, method, path, n, ids=10000):
    """N requests, one at a time, on one keep-alive connection (for
    scripts/bench/profile, where the server runs under callgrind and the
    requests' order and content must be the same every run). `{id}` in
    PATH becomes a pseudo-random id in 1..IDS (a fixed LCG sequence);
    POST sends a fixed valid pet. Any status but 2xx fails the run."""
    conn = connect(base)
    headers, body = request_parts(key, method)
    state = 12345
    for _ in range(n):
        sent = path
        if "{id}" in sent:
            state = (state * 1103515245 + 12345) % 2**31
            sent = sent.replace("{id}", str(state % ids + 1))
        conn.request(method, sent, body=body, headers=headers)
        response = conn.getresponse()
        response.read()
        if not 200 <= response.status < 300:
            raise ClientError(f"{method} {sent}: {response.status}")
    conn.close()


def capture(base, key, path, out, method="GET"):
    """GET (or POST the profiled pet to) PATH once and write the response
    as the server sent it: status line, header lines (names, order and
    values as received), a blank line, the body. The baseline answers
    every request with exactly this (examples/baseline.rs), so that the
    ruler sends the same bytes as the server."""
    conn = connect(base)
    headers, body = request_parts(key, method)
    conn.request(method, path, body=body, headers=headers)
    response = conn.getresponse()
    body = response.read()
    conn.close()
    if not 200 <= response.status < 300:
        raise ClientError(f"{method} {path}: {response.status}, not 2xx")
    lines = [f"HTTP/1.1 {response.status} {response.reason}"]
    lines += [f"{name}: {value}" for name, value in response.getheaders()]
    with open(out, "wb") as f:
        f.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)
    return (f"captured {method} {path}: {len(lines) - 1} headers, "
            f"{len(body)} bytes of body")


# --- the journal ------------------------------------------------------------

def journal(path, n):
    """The durable journal format: one line per pet, ids 1..N in order,
    `{"pet":{...},"crc32":"xxxxxxxx"}` with the CRC-32 of the pet bytes."""
    started = time.monotonic()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "wb") as f:
        chunk = []
        for pid in range(1, n + 1):
            pet = ('{"id":%d,"name":"pet-%06d","categoryId":%d,"status":"%s"}'
                   % (pid, pid, pid % 10 + 1, STATUSES[pid % 3])).encode()
            chunk.append(b'{"pet":%s,"crc32":"%08x"}\n'
                         % (pet, zlib.crc32(pet)))
            if len(chunk) == 50_000:
                f.write(b"".join(chunk))
                chunk = []
        f.write(b"".join(chunk))
    size = os.path.getsize(path)
    return (f"wrote {n} pets ({size / 1e6:.1f} MB) in "
            f"{time.monotonic() - started:.1f} s")


# --- transitions ------------------------------------------------------------

def all_statuses(conn, key, first=1, last=None):
    """{id: status} of the pets with ids FIRST..LAST (all when LAST is
    None), paging the list with `after`."""
    found = {}
    after = first - 1
    while True:
        path = "/v1/pets?limit=100" + (f"&after={after}" if after > 0 else "")
        conn.request("GET", path, headers={"Authorization": f"Bearer {key}"})
        response = conn.getresponse()
        body = response.read()
        if response.status != 200:
            raise ClientError(f"GET {path}: {response.status}")
        page = json.loads(body)
        for pet in page:
            if last is not None and pet["id"] > last:
                return found
            found[pet["id"]] = pet["status"]
        if not page or response.getheader("Link") is None:
            return found
        after = page[-1]["id"]


def statuses(base, key, first, last, out):
    """The pets FIRST..LAST as `id status` lines in OUT, for
    transitions.lua to start each run from the statuses the previous run
    left."""
    found = all_statuses(connect(base), key, first, last)
    missing = last - first + 1 - len(found)
    if missing:
        raise ClientError(f"{missing} of the pets {first}..{last} are missing")
    with open(out, "w", encoding="ascii") as f:
        f.writelines(f"{pid} {status}\n" for pid, status in sorted(found.items()))


# What a transition needs and leaves (the contract's table).
NEXT_STATUS = {"reserve": "pending", "release": "available", "sell": "sold"}
CONFLICT = re.compile(r"pet (\d+) is (available|pending|sold);")


def background(base, key, rate, threads, sell_share, duration, ready_file,
               stop_file, out):
    """Transitions at a paced RATE per second, on THREADS keep-alive
    connections, until STOP_FILE appears or DURATION s have passed (it
    stops by itself). Every pet of the inventory takes part: the statuses
    are read first, thread t owns the pets whose position in id order is
    t modulo THREADS (so no two requests race for a pet and nearly every
    request is an allowed step), and each request picks one of its
    pets uniformly, as a store's customers would: an available pet is
    reserved, a pending one released, either sold with SELL_SHARE (sold is
    final, so a small share keeps pets in play for the whole run).
    Writes OUT: the totals, and the 200s per tenth of a second (Unix
    time), from which the report takes the rate during each wrk run.
    Returns the summary line and whether every answer was a 200 or a
    409."""
    conn = connect(base)
    state = all_statuses(conn, key)
    conn.close()
    ids = sorted(state)
    if not ids:
        raise ClientError("no pets to drive")
    owned = [[pid for pid in ids[t::threads] if state[pid] != "sold"]
             for t in range(threads)]
    lock = threading.Lock()
    totals = {"ok": 0, "conflicts": 0, "other": 0, "errors": 0, "late": 0}
    ok_by_tenth = {}
    other_statuses = []
    started = time.monotonic()
    deadline = started + duration
    interval = threads / rate

    def stopped():
        return time.monotonic() >= deadline or os.path.exists(stop_file)

    def worker(t):
        rng = random.Random(1000 + t)
        mine = owned[t]
        headers = {"Authorization": f"Bearer {key}"}
        c = connect(base)
        # Threads start a fraction of an interval apart: the requests
        # spread over each interval rather than leaving together.
        next_at = time.monotonic() + interval * t / threads
        while mine and not stopped():
            now = time.monotonic()
            if next_at > now:
                time.sleep(next_at - now)
            elif now - next_at > 0.2:
                # Far behind (the host was busy): catch up at most 0.2 s
                # of requests, not a burst of everything missed.
                with lock:
                    totals["late"] += 1
                next_at = now - 0.2
            next_at += interval
            k = rng.randrange(len(mine))
            pid = mine[k]
            status = state[pid]
            if rng.random() < sell_share:
                action = "sell"
            else:
                action = "reserve" if status == "available" else "release"
            try:
                c.request("POST", f"/v1/pets/{pid}/{action}", headers=headers)
                response = c.getresponse()
                body = response.read()
            except (OSError, http.client.HTTPException):
                c.close()
                c = connect(base)
                with lock:
                    totals["errors"] += 1
                continue
            if response.status == 200:
                state[pid] = NEXT_STATUS[action]
                tenth = int(time.time() * 10)
                with lock:
                    totals["ok"] += 1
                    ok_by_tenth[tenth] = ok_by_tenth.get(tenth, 0) + 1
            elif response.status == 409:
                m = CONFLICT.search(body.decode("utf-8", "replace"))
                if m and int(m.group(1)) == pid:
                    state[pid] = m.group(2)
                with lock:
                    totals["conflicts"] += 1
            else:
                with lock:
                    totals["other"] += 1
                    other_statuses.append(response.status)
            if state[pid] == "sold":
                mine[k] = mine[-1]
                mine.pop()
        c.close()

    workers = [threading.Thread(target=worker, args=(t,), daemon=True)
               for t in range(threads)]
    for t in workers:
        t.start()
    with open(ready_file, "w", encoding="ascii") as f:
        f.write("ready\n")
    for t in workers:
        t.join()
    elapsed = time.monotonic() - started
    summary = dict(totals, rate=rate, secs=round(elapsed, 2),
                   pets=len(ids), sell_share=sell_share,
                   threads=threads,
                   other_statuses=sorted(set(other_statuses)),
                   ok_by_tenth=sorted(ok_by_tenth.items()))
    with open(out, "w", encoding="utf-8") as f:
        json.dump(summary, f)
    line = (f"background: {totals['ok']} transitions in {elapsed:.1f} s "
            f"({totals['ok'] / elapsed:.0f}/s, target {rate:.0f}/s) over "
            f"{len(ids)} pets; 409s {totals['conflicts']}, other statuses "
            f"{totals['other']}, connection errors {totals['errors']}")
    return line, not (totals["other"] or totals["errors"])


# --- /metrics, Redis's MONITOR -----------------------------------------------

def metrics_values(base, key, names):
    """The values of the metric lines `names` in BASE's /metrics."""
    conn = connect(base)
    conn.request("GET", "/metrics", headers={"Authorization": f"Bearer {key}"})
    response = conn.getresponse()
    body = response.read().decode("utf-8", "replace")
    if response.status != 200:
        raise ClientError(f"GET /metrics: {response.status}")
    values = {}
    for line in body.splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in names:
            values[parts[0]] = float(parts[1])
    missing = [n for n in names if n not in values]
    if missing:
        raise ClientError(f"no {', '.join(missing)} in /metrics")
    return [values[n] for n in names]


def batches(base, key, transitions=False):
    """A replica's creates (or, TRANSITIONS, transitions decided) and the
    PostgreSQL transactions that wrote them, so far."""
    name = ("petstore_postgres_transition_batch_size" if transitions
            else "petstore_postgres_batch_size")
    items, transactions = metrics_values(base, key, [name + "_sum", name + "_count"])
    return round(items), round(transactions)


def redis_batches(base, key):
    """Requests decided in Redis and script calls so far (--redis)."""
    decided, calls = metrics_values(
        base, key,
        ["petstore_redis_decisions_total", "petstore_redis_duration_seconds_count"])
    return round(decided), round(calls)


def evalsha(monitor):
    """The first EVALSHA of a `redis-cli monitor` capture, its words (the
    command name first): `EVALSHA`, the SHA, `1`, the key, `` ..."""
    with open(monitor, encoding="utf-8", errors="replace") as f:
        for line in f:
            if '"EVALSHA"' not in line:
                continue
            words = re.findall(r'"((?:[^"\\]|\\.)*)"', line)
            words = words[words.index("EVALSHA"):]
            if any("\\" in w or "\n" in w for w in words):
                raise ClientError(f"an escaped argument in {line!r}")
            return words
    raise ClientError("no EVALSHA in the capture")


# --- memory -----------------------------------------------------------------

def vmrss_kib(pid):
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise ClientError("no VmRSS")


def memwatch(pid, base, key, start_id, interval, duration, ready_file,
             stop_file, out, say):
    """VmRSS of PID and the pets added since START_ID: once before the load
    (then READY_FILE is written), every INTERVAL s while it runs, and once
    after it stopped (STOP_FILE appears). SAY gets a line per sample."""
    conn = connect(base)
    added = 0
    last = start_id
    started = time.monotonic()

    def sample(recount=False):
        nonlocal added, last, conn
        rss = vmrss_kib(pid)
        if recount:
            added, last = 0, start_id
        try:
            n, last = count_after(conn, key, last)
        except (OSError, http.client.HTTPException):
            conn.close()
            conn = connect(base)
            n, last = count_after(conn, key, last)
        added += n
        s = {"t": round(time.monotonic() - started, 1), "rss_kib": rss,
             "added": added}
        with open(out, "a", encoding="utf-8") as f:
            f.write(json.dumps(s) + "\n")
        say(f"  t={s['t']:5.1f} s  VmRSS {rss / 1024:8.1f} MiB  "
            f"pets added {added}")

    def stopped():
        return os.path.exists(stop_file)

    sample()
    # The first sample is the one before the load: tell the script to start.
    with open(ready_file, "w", encoding="ascii") as f:
        f.write("ready\n")
    k = 1
    # A sample every INTERVAL s while the load runs; none at or after its
    # end: the last one is taken once the load has stopped (exact count).
    while not stopped() and k * interval < duration:
        deadline = started + k * interval
        while time.monotonic() < deadline and not stopped():
            time.sleep(0.05)
        if stopped():
            break
        sample()
        k += 1
    while not stopped() and time.monotonic() < started + duration + 60:
        time.sleep(0.05)
    # Count from the start again: exact even if a pet became visible after
    # one with a higher id (the cursor would have stepped over it).
    sample(recount=True)
