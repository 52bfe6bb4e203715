"""The load benchmark's run: the plan of scenarios, rounds and targets,
and the processes that carry it out (the servers and rulers, wrk,
pgbench, redis-benchmark, scripts/cluster, the background clients), all
on 127.0.0.1.

scripts/bench/load starts it after the build, giving it the binaries
and, when the switches ask for them, the private PostgreSQL and Redis it
started (scripts/lib.sh), which it stops afterwards. Everything started
here is stopped here, on every way out (an error, SIGTERM, the end).
What each step measures and why: docs/load.md, "What it does".
"""

import contextlib
import http.client
import io
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import clients
import report
import switches
from switches import REPLICA_CONNS, THREADS

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
LOAD_PY = HERE / "load.py"
LIB = ROOT / "scripts" / "lib.sh"
CLUSTER = ROOT / "scripts" / "cluster"
# How the report names the command.
COMMAND = "scripts/bench/load"

SEED_PETS = 10000          # the in-memory server's pets, and each replica's
JOURNAL_PETS = 1_000_000   # the memory check's replayed journal
MIXED_CONNS = 64           # the memory check's mixed load
TX_PETS = 4000             # the durable server's pets for transitions.lua
TX_RATE = 1000             # the background client's transitions per second
TX_THREADS = 8             # ... over this many keep-alive connections
KEY_COUNT = 64             # keys of the many-keys scenario (list_keys)
# The replica's pets for transitions.lua (LOAD_REPLICAS with
# LOAD_TRANSITIONS): seeded after the SEED_PETS, so these ids.
RTX_FIRST, RTX_LAST = SEED_PETS + 1, SEED_PETS + TX_PETS
# The wrk scripts: each is report.lua (the done() that prints the
# numbers) followed by the scenario's own part.
WRK_SCRIPTS = ("get", "get_keys", "get_id", "post", "post_keyed", "mixed", "transitions")
# In a scenario's steps: where the round's hook runs.
HOOK = "(hook)"
# What a client call to a server under test can fail with.
CLIENT_ERRORS = (clients.ClientError, OSError, ValueError, http.client.HTTPException)


def log(message):
    print(f"== load: {message}", file=sys.stderr, flush=True)


class Failed(Exception):
    """Why the run stops; printed as its FAILED line."""


def die(message):
    raise Failed(message)


def scenario_steps(conns, rounds, page_only_at=None, before=False, extra=(), hook=False):
    """The runs of one scenario, in order, as (connections, round,
    target): for every connection count, rounds interleaved server,
    baseline, server, baseline, ...; at PAGE_ONLY_AT, page_only after each
    baseline run, and before (LOAD_BEFORE) after that; the round's HOOK
    (when there is one) then; and at REPLICA_CONNS, the targets of EXTRA
    (LOAD_REPLICAS) after those."""
    for c in conns:
        for r in range(1, rounds + 1):
            yield c, r, "server"
            yield c, r, "baseline"
            if c == page_only_at:
                yield c, r, "page_only"
                if before:
                    yield c, r, "before"
            if hook:
                yield c, r, HOOK
            if c != REPLICA_CONNS:
                continue
            for t in extra:
                yield c, r, t


class Server:
    """A process this run started that serves HTTP at BASE."""

    def __init__(self, name, proc, base):
        self.name, self.proc, self.base = name, proc, base

    @property
    def pid(self):
        return self.proc.pid

    def alive(self):
        return self.proc.poll() is None


def pid_alive(pid):
    """Whether PID runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
            return f.read().rsplit(") ", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def cpu_ticks(pid):
    """utime + stime of PID, in clock ticks (fields 14 and 15 of its stat,
    counted after the command's closing parenthesis)."""
    with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as f:
        fields = f.read().rsplit(") ", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def status_of(returncode):
    """A process's exit status as the shell gives it (128 + a signal)."""
    return 128 - returncode if returncode < 0 else returncode


def machine():
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
        model = next((line.split(": ", 1)[1].strip() for line in f
                      if line.startswith("model name") and ": " in line), "")
    return len(os.sched_getaffinity(0)), model


def loadavg():
    with open("/proc/loadavg", encoding="ascii") as f:
        return " ".join(f.read().split()[:3])


def git(*args):
    r = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True)
    return r.stdout.strip() if r.returncode == 0 else None


def commit_text(before=None):
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=ROOT,
                           stderr=subprocess.DEVNULL).returncode != 0
    text = (git("rev-parse", "--short", "HEAD") or "?") + (" + uncommitted changes" if dirty else "")
    if before:
        text += f"; before: {before} ({git('rev-parse', '--short', before) or ''})"
    return text


def command_line():
    """The run's command as the report gives it: its LOAD_ switches, then
    the script."""
    words = sorted(f"{k}={v}" for k, v in os.environ.items() if k.startswith("LOAD_"))
    return "".join(w + " " for w in words) + COMMAND


class Run:
    def __init__(self, sw, args):
        self.s = sw
        self.a = args
        self.procs = []          # every process started and not yet reaped
        self.cluster = None      # scripts/cluster: stopped first, given time
        self.work = None
        self.out = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "target") / "load"
        self.targets = {}        # the servers a scenario's step can name
        self.tx_conns = sw.conns[0]
        self.eval_args = []
        self.redis_n = self.redis_n16 = 0

    # --- processes -----------------------------------------------------------

    def spawn(self, cmd, out, err=subprocess.STDOUT, cwd=None, env=None):
        """Starts CMD with its output in the file OUT (a path) or the stream
        OUT, its errors in ERR likewise (by default with the output)."""
        opened = []

        def target(where):
            if isinstance(where, (str, Path)):
                f = open(where, "wb")
                opened.append(f)
                return f
            return where
        try:
            proc = subprocess.Popen([str(c) for c in cmd], stdin=subprocess.DEVNULL,
                                    stdout=target(out), stderr=target(err),
                                    cwd=cwd, env=env)
        finally:
            for f in opened:
                f.close()
        self.procs.append(proc)
        return proc

    def forget(self, proc):
        if proc in self.procs:
            self.procs.remove(proc)

    def wait(self, proc):
        status = status_of(proc.wait())
        self.forget(proc)
        return status

    def start(self, name, cmd):
        """Starts CMD in the work directory and waits for its `listening on
        http://IP:PORT` line: a Server at that base, on loopback."""
        out, err = self.work / f"{name}.out", self.work / f"{name}.err"
        proc = self.spawn(cmd, out, err, cwd=self.work)
        base = ""
        for _ in range(1200):
            m = re.search(r"listening on (http://[0-9.]+:[0-9]+)", out.read_text(errors="replace"))
            if m:
                base = m.group(1)
                break
            if proc.poll() is not None:
                sys.stderr.write("".join(err.read_text(errors="replace").splitlines(True)[-20:]))
                die(f"{name} exited before listening")
            time.sleep(0.1)
        if not base:
            die(f"{name} printed no 'listening on' line within 120 s")
        if not base.startswith("http://127."):
            die(f"{name} listens on {base}, not on loopback")
        return Server(name, proc, base)

    def stop(self, proc, sig):
        """Stops one process this run started, and waits for it."""
        with contextlib.suppress(ProcessLookupError):
            proc.send_signal(sig)
        for _ in range(50):
            if proc.poll() is not None:
                break
            time.sleep(0.1)
        if proc.poll() is None:
            log(f"pid {proc.pid} did not stop on {signal.Signals(sig).name} within 5 s; killing it")
            proc.kill()
        proc.wait()
        self.forget(proc)

    def stop_cluster(self):
        """scripts/cluster stops its own parts on SIGTERM (replicas,
        HAProxy, Redis, then PostgreSQL): given up to 30 s for that."""
        if self.cluster is None:
            return
        proc, self.cluster = self.cluster, None
        with contextlib.suppress(ProcessLookupError):
            proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        self.forget(proc)

    def cleanup(self):
        self.stop_cluster()
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(signal.SIGINT)
        for proc in self.procs:
            for _ in range(20):
                if proc.poll() is not None:
                    break
                time.sleep(0.1)
            if proc.poll() is None:
                proc.kill()
            proc.wait()
        self.procs = []
        if self.work is not None:
            shutil.rmtree(self.work, ignore_errors=True)

    def wait_for(self, secs, what, ready):
        """Polls READY every 0.1 s; dies after SECS, as lib.sh's wait_for."""
        deadline = time.monotonic() + secs
        while not ready():
            if time.monotonic() >= deadline:
                die(f"gave up waiting for {what} after {secs} s")
            time.sleep(0.1)

    def file_has(self, path, test):
        def ready():
            try:
                with open(path, encoding="utf-8", errors="replace") as f:
                    return any(test(line) for line in f)
            except OSError:
                return False
        return ready

    # --- the clients -----------------------------------------------------------

    def client(self, cmd, why, timeout=None):
        """Runs a subcommand of load.py (its output on stderr) in a
        process of its own, bounded to TIMEOUT s; dies with WHY when it
        fails."""
        proc = self.spawn([sys.executable, LOAD_PY, *cmd], sys.stderr, sys.stderr)
        try:
            status = status_of(proc.wait(timeout=timeout))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            status = 124
        self.forget(proc)
        if status != 0:
            die(why)

    def seed(self, base, n, threads, timeout, why, *flags):
        self.client(["seed", base, self.key, n, threads, *flags], why, timeout)

    def count(self, base, after):
        """How many pets have an id above AFTER, or None (said) when they
        could not be counted."""
        try:
            return clients.count(base, self.key, after)
        except CLIENT_ERRORS as e:
            log(f"counting the pets of {base}: {e}")
            return None

    def metric_pair(self, fetch):
        """A pair of /metrics counters, or 0 0 when they cannot be read."""
        try:
            return fetch()
        except CLIENT_ERRORS:
            return 0, 0

    # --- one run ------------------------------------------------------------------

    def record(self, results, kind, logf, scenario, conns, target, rnd, ticks, status,
               started=None, ended=None):
        row, line = report.record(kind, str(logf), scenario, conns, target, rnd, ticks,
                                  self.clk_tck, status, started, ended)
        with open(results, "a", encoding="utf-8") as f:
            f.write(json.dumps(row) + "\n")
        print(line, file=sys.stderr, flush=True)

    def run_wrk(self, logf, secs, conns, script, url, args=()):
        """One bounded wrk run; its exit status."""
        return self.wait(self.spawn(
            ["timeout", "--kill-after=5", secs + 30,
             "wrk", f"-t{THREADS}", f"-c{conns}", f"-d{secs}s", "--latency",
             "-H", f"Authorization: Bearer {self.key}", "-s", script, url, "--", *args],
            logf))

    def measure(self, scenario, conns, target, rnd, server, path, script, args=()):
        if not server.alive():
            die(f"the {target} died before {scenario} c={conns} round {rnd}")
        logf = self.out / f"{scenario}-c{conns}-{target}-r{rnd}.log"
        before = cpu_ticks(server.pid)
        started = time.time()
        status = self.run_wrk(logf, self.s.secs, conns, self.work / f"{script}.lua",
                              server.base + path, args)
        ended = time.time()
        try:
            after = cpu_ticks(server.pid)
        except OSError:
            die(f"the {target} died during {scenario} c={conns} round {rnd}")
        self.record(self.results, "wrk", logf, scenario, conns, target, rnd,
                    after - before, status, started, ended)

    def measure_pgbench(self, scenario, conns, rnd):
        """pgbench's one-create transaction, CONNS clients for LOAD_SECS."""
        logf = self.out / f"{scenario}-c{conns}-pgbench-r{rnd}.log"
        status = self.wait(self.spawn(
            ["timeout", "--kill-after=5", self.s.secs + 60,
             Path(self.a.pg_bin) / "pgbench", "-n", "-M", "prepared", "-c", conns,
             "-j", THREADS, "-T", self.s.secs, "-f", HERE / "create.pgbench",
             self.pg_url_bench], logf))
        self.record(self.results, "pgbench", logf, scenario, conns, "pgbench", rnd, 0, status)

    def measure_redis(self, scenario, conns, rnd, target, pipeline, n):
        """redis-benchmark sending a list request's own EVALSHA, N calls
        (about LOAD_SECS), PIPELINE calls in flight per connection."""
        logf = self.out / f"{scenario}-c{conns}-{target}-r{rnd}.log"
        proc = self.spawn(
            ["timeout", "--kill-after=5", self.s.secs * 5 + 30,
             "redis-benchmark", "-h", "127.0.0.1", "-p", self.a.redis_port, "-c", conns,
             "--threads", THREADS, "-P", pipeline, "-n", n, "--csv", *self.eval_args], logf)
        before = cpu_ticks(self.a.redis_pid)
        status = self.wait(proc)
        after = cpu_ticks(self.a.redis_pid)
        self.record(self.results, "redis", logf, scenario, conns, target, rnd,
                    after - before, status)

    def redis_calls(self, pipeline):
        """How many calls take about LOAD_SECS: a short calibration run of
        20,000 x PIPELINE calls."""
        r = subprocess.run(
            ["timeout", "60", "redis-benchmark", "-h", "127.0.0.1", "-p", str(self.a.redis_port),
             "-c", str(REPLICA_CONNS), "--threads", str(THREADS), "-P", str(pipeline),
             "-n", str(20000 * pipeline), "--csv", *self.eval_args],
            stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        parsed = report.redis_csv(r.stdout.splitlines()) if r.returncode == 0 else None
        if parsed is None:
            die("redis-benchmark's calibration run failed")
        return max(10000, min(20000000, int(float(parsed["rps"]) * self.s.secs)))

    # --- scenarios --------------------------------------------------------------

    def scenario(self, name, server, path, script, args=(), conns=None, page_only_at=None,
                 extra=(), hook=None):
        """Every run of scenario NAME against SERVER and its rulers (see
        scenario_steps): `target` of EXTRA names a server of self.targets,
        pgbench, a Redis ceiling or the replica's transitions."""
        for c, r, t in scenario_steps(conns or self.s.conns, self.s.rounds, page_only_at,
                                      "before" in self.targets, extra, hook is not None):
            if t == "server":
                self.measure(name, c, t, r, server, path, script, args)
            elif t == HOOK:
                hook(name, c, r)
            elif t == "pgbench":
                self.measure_pgbench(name, c, r)
            elif t == "redis_ceiling":
                self.measure_redis(name, c, r, t, 1, self.redis_n)
            elif t == "redis_ceiling_p16":
                self.measure_redis(name, c, r, t, 16, self.redis_n16)
            elif t == "replica_tx":
                self.replica_transitions_round(name, c, r)
            else:
                self.measure(name, c, t, r, self.targets[t], path, script, args)

    def transitions_round(self, name, c, r):
        """The durable transitions (LOAD_TRANSITIONS), on the durable
        server, right after its POST runs of the round, at the first
        connection count. The statuses the previous run left are read
        first, outside the measured run, so that every step of this one is
        an allowed one."""
        if c != self.tx_conns:
            return
        durable = self.targets["durable"]
        statuses = self.work / "tx-statuses.txt"
        try:
            clients.statuses(durable.base, self.key, 1, TX_PETS, statuses)
        except CLIENT_ERRORS as e:
            log(str(e))
            die("could not read the statuses of the durable server's pets")
        self.measure(name, c, "transitions", r, durable, "/v1/pets", "transitions",
                     [1, TX_PETS, THREADS, statuses])

    def replica_transitions_round(self, name, c, r):
        """The replica's transitions right after its POST run of the round,
        as transitions_round on the durable server. The statuses are read
        from the replica itself: it is their only writer, and it reads its
        own writes."""
        replica = self.targets["replica"]
        statuses = self.work / "rtx-statuses.txt"
        try:
            clients.statuses(replica.base, self.key, RTX_FIRST, RTX_LAST, statuses)
        except CLIENT_ERRORS as e:
            log(str(e))
            die("could not read the statuses of the replica's pets")
        self.measure(name, c, "replica_tx", r, replica, "/v1/pets", "transitions",
                     [RTX_FIRST, RTX_LAST, THREADS, statuses])

    def tx_scenario(self, name, path):
        """The list scenario NAME at the first connection count on the
        in-memory server while a background client makes TX_RATE
        transitions a second on it, through the server's and the
        baseline's runs alike (the client takes its share of the same
        cores from both). The client is bounded: it stops by itself after
        the time the scenario should take plus a margin, or at once when
        told."""
        bound = self.s.rounds * 2 * (self.s.secs + 5) + 60
        ready, stop = self.work / "background.ready", self.work / "background.stop"
        for f in (ready, stop):
            f.unlink(missing_ok=True)
        server = self.targets["server"]
        bg = self.spawn([sys.executable, LOAD_PY, "background", "--base", server.base,
                         "--key", self.key, "--rate", TX_RATE, "--threads", TX_THREADS,
                         "--duration", bound, "--ready-file", ready, "--stop-file", stop,
                         "--out", self.out / f"background-{name}.json"],
                        sys.stderr, sys.stderr)
        for _ in range(300):
            if ready.exists():
                break
            if bg.poll() is not None:
                die(f"the background client of {name} exited before it started")
            time.sleep(0.1)
        if not ready.exists():
            die(f"the background client of {name} did not start within 30 s")
        self.scenario(name, server, path, "get", conns=[self.tx_conns])
        stop.touch()
        status = self.wait(bg)
        if status != 0:
            die(f"the background client of {name} failed (status {status}): see above")

    # --- the run --------------------------------------------------------------------

    def prepare(self):
        """The work directory, the binaries copied aside (a concurrent
        rebuild cannot swap them mid-run), the wrk scripts and the keys."""
        self.work = Path(tempfile.mkdtemp(prefix="petstore-load.",
                                          dir=os.environ.get("TMPDIR") or "/tmp"))
        (self.work / "bin").mkdir()
        self.out.mkdir(parents=True, exist_ok=True)
        for pattern in ("*.log", "*.jsonl", "background-*.json", "report.md"):
            for old in self.out.glob(pattern):
                old.unlink()
        self.server_bin = self.work / "bin" / "petstore-server"
        self.baseline_bin = self.work / "bin" / "baseline"
        shutil.copy2(self.a.server_bin, self.server_bin)
        shutil.copy2(self.a.baseline_bin, self.baseline_bin)
        if self.a.before_bin:
            self.before_bin = self.work / "bin" / "petstore-server-before"
            shutil.copy2(self.a.before_bin, self.before_bin)
        shared = (HERE / "report.lua").read_bytes()
        for s in WRK_SCRIPTS:
            (self.work / f"{s}.lua").write_bytes(shared + (HERE / f"{s}.lua").read_bytes())
        self.clk_tck = os.sysconf("SC_CLK_TCK")
        self.key = "load-" + os.urandom(16).hex()
        # The load key, and KEY_COUNT more (`KEY-k0` ...) for the many-keys
        # scenario; all enterprise at the highest quota, so nothing is
        # refused.
        def entry(name, k):
            return {"name": name, "key": k, "plan": "enterprise",
                    "perMinute": 100000000, "perDay": 100000000}
        keys = [entry("load", self.key)] + [entry(f"load-k{i}", f"{self.key}-k{i}")
                                            for i in range(KEY_COUNT)]
        self.keys = self.work / "keys.json"
        fd = os.open(self.keys, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"keys": keys}) + "\n")
        self.results = self.work / "results.jsonl"
        self.results.write_text("")
        # wrk opens every connection from 127.0.0.1: lift the per-address
        # cap (an eighth of --max-connections by default) to the whole
        # maximum, as the baseline does. An environment variable, so that a
        # LOAD_BEFORE server that predates the flag starts too.
        os.environ["PETSTORE_MAX_CONNECTIONS_PER_ADDRESS"] = "1024"

    def in_memory(self, name, binary, *flags):
        return self.start(name, [binary, "--addr", "127.0.0.1:0", "--keys", self.keys,
                                 "--in-memory", *flags])

    def single_node(self):
        s = self.s
        t0 = time.monotonic()
        self.loadavg = loadavg()
        cores, model = machine()
        log(f"machine: {cores} cores, {model}; load average {self.loadavg}")
        log(f"runs of {s.secs} s, {s.rounds} round(s), connections: "
            f"{' '.join(map(str, s.conns))}; mixed load {s.mixed_secs} s")

        # --- servers, seed, the rulers
        server = self.targets["server"] = self.in_memory("server", self.server_bin)
        log(f"petstore-server (in memory) at {server.base} (pid {server.pid})")
        log(f"seeding {SEED_PETS} pets")
        self.seed(server.base, SEED_PETS, 4, 60, "seeding failed or took over 60 s")
        if self.count(server.base, 0) != SEED_PETS:
            die(f"the server does not hold exactly {SEED_PETS} pets after seeding")
        if s.before:
            before = self.targets["before"] = self.in_memory("before", self.before_bin)
            log(f"petstore-server of {s.before} (in memory) at {before.base} "
                f"(pid {before.pid}); seeding it")
            self.seed(before.base, SEED_PETS, 4, 60, f"seeding the server of {s.before} failed")

        try:
            said = clients.capture(server.base, self.key, "/v1/pets?limit=20",
                                   self.work / "list.http")
        except CLIENT_ERRORS as e:
            log(str(e))
            die("could not capture the server's list response for the baseline")
        print(said, file=sys.stderr, flush=True)
        shutil.copy(self.work / "list.http", self.out / "baseline-response.http")
        baseline = self.targets["baseline"] = self.start(
            "baseline", [self.baseline_bin, "127.0.0.1:0", self.work / "list.http"])
        log(f"baseline (the server's list response, byte for byte) at {baseline.base} "
            f"(pid {baseline.pid})")
        page_only = self.targets["page_only"] = self.start(
            "page_only", [self.baseline_bin, "127.0.0.1:0"])
        log(f"page-only baseline (the earlier ruler) at {page_only.base} (pid {page_only.pid})")

        # The durable server (fsync always) starts here: with LOAD_REPLICAS
        # it is a target of the in-memory POST rounds too.
        (self.work / "durable").mkdir()
        fstype = subprocess.run(["df", "--output=fstype", self.work / "durable"],
                                capture_output=True, text=True).stdout.split()
        log(f"durable data dir on {fstype[-1] if fstype else '?'}")
        durable = self.targets["durable"] = self.start(
            "durable", [self.server_bin, "--addr", "127.0.0.1:0", "--keys", self.keys,
                        "--data", self.work / "durable", "--fsync", "always"])
        log(f"petstore-server (durable, fsync always) at {durable.base} (pid {durable.pid})")
        if s.transitions:
            # Before any POST: ids 1..TX_PETS are these pets, all available.
            log(f"seeding {TX_PETS} available pets on the durable server for the transitions")
            self.seed(durable.base, TX_PETS, 16, 120,
                      "seeding the durable server failed or took over 120 s",
                      "--status", "available")
            if self.count(durable.base, 0) != TX_PETS or self.count(durable.base, TX_PETS) != 0:
                die(f"the durable server does not hold exactly the pets 1..{TX_PETS}")

        ceilings = []
        if s.replicas:
            ceilings = self.start_replicas()

        # --- the scenarios: the GET ones first; POST then grows the same
        # inventory.
        first = s.conns[0]
        extra = ["replica", "replica_redis", "cluster", *ceilings] if s.replicas else []
        # Replica + Redis: requests decided in Redis and script calls,
        # around the scenario (their quotient is the mean batch of one
        # key's requests).
        if s.replicas:
            redis_base = self.targets["replica_redis"].base
            decided0, calls0 = self.metric_pair(lambda: clients.redis_batches(redis_base, self.key))
        self.scenario("list", server, "/v1/pets?limit=20", "get", page_only_at=first, extra=extra)
        if s.replicas:
            decided1, calls1 = self.metric_pair(lambda: clients.redis_batches(redis_base, self.key))
            # The same list over KEY_COUNT keys in turn: one key's requests
            # rarely meet in a call, so this is Redis one call per request.
            self.scenario("list_keys", server, "/v1/pets?limit=20", "get_keys",
                          [f"{self.key}-k", KEY_COUNT], conns=[REPLICA_CONNS],
                          extra=["replica_redis"])
            decided2, calls2 = self.metric_pair(lambda: clients.redis_batches(redis_base, self.key))
            (self.work / "redis_batches.json").write_text(json.dumps({
                "list": {"decided": decided1 - decided0, "calls": calls1 - calls0},
                "list_keys": {"decided": decided2 - decided1, "calls": calls2 - calls1},
            }) + "\n")
            # Their one scenario is done: the replica with Redis must not
            # tail replica POST's creates, and the cluster's cores are
            # given back.
            self.stop(self.targets["replica_redis"].proc, signal.SIGTERM)
            self.stop_cluster()
        self.scenario("list_sold", server, "/v1/pets?status=sold&limit=20", "get",
                      page_only_at=first)
        if s.transitions:
            # The lists under change, after the same lists without it (and
            # the page the transitions churn most, without them too).
            self.scenario("list_available", server, "/v1/pets?status=available&limit=20",
                          "get", conns=[self.tx_conns])
            self.tx_scenario("list_tx", "/v1/pets?limit=20")
            self.tx_scenario("list_sold_tx", "/v1/pets?status=sold&limit=20")
            self.tx_scenario("list_available_tx", "/v1/pets?status=available&limit=20")
        self.scenario("get_id", server, "/v1/pets/1", "get_id", [SEED_PETS],
                      page_only_at=first, extra=["replica"] if s.replicas else [])
        extra = ["replica", "pgbench", "durable"] if s.replicas else []
        if s.replicas and s.transitions:
            # After the GET scenarios (their pets are the SEED_PETS), before
            # any POST: the ids RTX_FIRST..RTX_LAST, all available;
            # replica_tx right after the replica's POST, in the same round.
            replica = self.targets["replica"]
            log(f"seeding {TX_PETS} available pets on the replica for the transitions")
            self.seed(replica.base, TX_PETS, 16, 120,
                      "seeding the replica's transition pets failed or took over 120 s",
                      "--status", "available")
            if (self.count(replica.base, SEED_PETS) != TX_PETS
                    or self.count(replica.base, RTX_LAST) != 0):
                die(f"the replica does not hold exactly the pets {RTX_FIRST}..{RTX_LAST} after them")
            extra = ["replica", "replica_tx", "pgbench", "durable"]
        # Replica POST's commits: its batch histogram around the scenario.
        if s.replicas:
            replica_base = self.targets["replica"].base
            creates0, tx0 = self.metric_pair(lambda: clients.batches(replica_base, self.key))
            if s.transitions:
                made0, ttx0 = self.metric_pair(
                    lambda: clients.batches(replica_base, self.key, transitions=True))
        self.scenario("post_mem", server, "/v1/pets", "post", page_only_at=first, extra=extra)
        if s.replicas:
            creates1, tx1 = self.metric_pair(lambda: clients.batches(replica_base, self.key))
            (self.work / "batches.json").write_text(json.dumps({
                "creates": creates1 - creates0, "transactions": tx1 - tx0,
                "runs": s.rounds, "secs": s.secs}) + "\n")
            if s.transitions:
                made1, ttx1 = self.metric_pair(
                    lambda: clients.batches(replica_base, self.key, transitions=True))
                (self.work / "tx_batches.json").write_text(json.dumps({
                    "decided": made1 - made0, "transactions": ttx1 - ttx0,
                    "runs": s.rounds, "secs": s.secs}) + "\n")
        self.stop(server.proc, signal.SIGTERM)
        self.stop(page_only.proc, signal.SIGINT)
        if s.before:
            self.stop(self.targets["before"].proc, signal.SIGTERM)
        if s.replicas:
            self.stop(self.targets["replica"].proc, signal.SIGTERM)
            self.stop_redis()
            if self.lib("stop_postgres", self.a.pg_dir, "fast") != 0:
                log("PostgreSQL did not stop cleanly (the exit trap tries again)")

        # The cost of observability (LOAD_OBSERVABILITY=1): the list
        # scenario again on servers that differ from the one above in one
        # flag each, at the first connection count only.
        variants = {"nometrics": ["--metrics", "false"], "accesslog": ["--access-log"]}
        for variant, flags in (variants.items() if s.observability else ()):
            v = self.in_memory(variant, self.server_bin, *flags)
            self.seed(v.base, SEED_PETS, 4, 60, f"seeding {variant} failed")
            self.scenario(f"list_{variant}", v, "/v1/pets?limit=20", "get", conns=[first])
            self.stop(v.proc, signal.SIGTERM)

        self.scenario("post_durable", durable, "/v1/pets", "post",
                      hook=self.transitions_round if s.transitions else None)
        self.stop(durable.proc, signal.SIGTERM)
        shutil.rmtree(self.work / "durable")
        self.stop(baseline.proc, signal.SIGINT)
        log(f"throughput runs done in {time.monotonic() - t0:.0f} s")

        self.memory(t0)
        return self.write_report()

    def start_replicas(self):
        """LOAD_REPLICAS: pgbench's database, the replica, the replica with
        Redis, the Redis ceilings' call, scripts/cluster; returns the
        ceilings that can be measured."""
        a = self.a
        if not a.pg_url:
            die("LOAD_REPLICAS=1 needs the PostgreSQL that scripts/bench/load starts")
        t_rep = time.monotonic()
        self.pg_url_bench = re.sub(r"/postgres$", "/pgbench", a.pg_url)
        created = subprocess.run(
            ["timeout", "30", Path(a.pg_bin) / "psql", "-q", "-X", "-v", "ON_ERROR_STOP=1",
             a.pg_url, "-c", "CREATE DATABASE pgbench"], stdout=subprocess.DEVNULL,
            stdin=subprocess.DEVNULL)
        if created.returncode != 0:
            die("could not create pgbench's database")
        # pgbench's database gets the server's own schema: a server
        # migrates it at start.
        schema = self.start("pgschema", [self.server_bin, "--addr", "127.0.0.1:0",
                                         "--keys", self.keys, "--postgres", self.pg_url_bench])
        self.stop(schema.proc, signal.SIGTERM)

        replica = self.targets["replica"] = self.start(
            "replica", [self.server_bin, "--addr", "127.0.0.1:0", "--keys", self.keys,
                        "--postgres", a.pg_url])
        log(f"replica (--postgres) at {replica.base} (pid {replica.pid}); "
            f"seeding {SEED_PETS} pets through it")
        # 16 connections: the committer batches their creates.
        self.seed(replica.base, SEED_PETS, 16, 120, "seeding the replica failed or took over 120 s")
        if self.count(replica.base, 0) != SEED_PETS:
            die(f"the replica does not hold exactly {SEED_PETS} pets after seeding")

        redis_url = f"redis://127.0.0.1:{a.redis_port}"
        with_redis = self.targets["replica_redis"] = self.start(
            "replica_redis", [self.server_bin, "--addr", "127.0.0.1:0", "--keys", self.keys,
                              "--postgres", a.pg_url, "--redis", redis_url])
        log(f"replica with Redis (--postgres --redis) at {with_redis.base} (pid {with_redis.pid})")
        if self.count(with_redis.base, 0) != SEED_PETS:
            die(f"the replica with Redis did not load exactly {SEED_PETS} pets into its copy")

        # The EVALSHA one list request sends, as Redis received it.
        monitor = self.work / "monitor.txt"
        mon = self.spawn(["timeout", "10", "redis-cli", "-p", a.redis_port, "monitor"], monitor)
        self.wait_for(5, "redis-cli monitor", self.file_has(monitor, lambda l: l.startswith("OK")))
        try:
            clients.drive(with_redis.base, self.key, "GET", "/v1/pets?limit=20", 1)
        except CLIENT_ERRORS as e:
            die(f"the list request to the replica with Redis failed: {e}")
        self.wait_for(5, "the list request's EVALSHA", self.file_has(monitor, lambda l: '"EVALSHA"' in l))
        self.stop(mon, signal.SIGTERM)
        shutil.copy(monitor, self.out / "redis-evalsha.txt")
        # redis-benchmark and redis-cli take the call's words as arguments:
        # a call whose arguments hold bytes an argument cannot (a NUL, in
        # the packed quotas) cannot be replayed, and the ceilings are then
        # left out of the run (said here and by their absence from the
        # report).
        ceilings = ["redis_ceiling", "redis_ceiling_p16"]
        try:
            self.eval_args = clients.evalsha(monitor)
        except CLIENT_ERRORS:
            self.eval_args = None
        if self.eval_args is not None:
            if len(self.eval_args) < 4:
                die("could not read the EVALSHA from Redis's MONITOR")
            # The same call must succeed (12 integers, outcome 0: allowed),
            # or the ceiling would measure an error reply.
            answer = subprocess.run(["redis-cli", "-p", str(a.redis_port), *self.eval_args],
                                    capture_output=True, text=True, stdin=subprocess.DEVNULL)
            reply = (answer.stdout.splitlines() or [""])[0]
            if reply != "0":
                die(f"the captured EVALSHA does not answer 'allowed' from redis-cli "
                    f"(first field: {reply})")
            # How many calls take about LOAD_SECS, one call in flight per
            # connection (as -c 64 clients) and 16 (as the server's one
            # multiplexed connection pipelines the calls of concurrent
            # requests).
            self.redis_n = self.redis_calls(1)
            self.redis_n16 = self.redis_calls(16)
            log(f"the Redis ceiling: {' '.join(self.eval_args[:4])} ... ({self.redis_n} calls "
                f"a run, {self.redis_n16} pipelined by 16)")
        else:
            self.eval_args = []
            ceilings = []
            log("the Redis ceilings are left out: the list request's EVALSHA cannot be "
                "replayed as arguments")

        # The cluster as a newcomer runs it (scripts/cluster: HAProxy in
        # front of two replicas with --postgres --redis --proxy-protocol,
        # on a PostgreSQL and a Redis of its own), with this run's keys
        # file: the list through HAProxy, in the same rounds.
        port = free_port()
        cluster_out = self.work / "cluster.out"
        self.cluster = self.spawn([CLUSTER, "--secs", 3600], cluster_out,
                                  env=dict(os.environ, CLUSTER_KEYS=str(self.keys),
                                           CLUSTER_PORT=str(port)))
        self.wait_for(180, "scripts/cluster",
                      self.file_has(cluster_out, lambda l: l.startswith("petstore cluster:")))
        cluster = self.targets["cluster"] = Server("cluster", self.cluster, f"http://127.0.0.1:{port}")
        log(f"cluster (scripts/cluster) at {cluster.base}; seeding {SEED_PETS} pets through HAProxy")
        self.seed(cluster.base, SEED_PETS, 16, 120, "seeding the cluster failed or took over 120 s")
        if self.count(cluster.base, 0) != SEED_PETS:
            die(f"the cluster does not hold exactly {SEED_PETS} pets after seeding")
        log(f"replicas ready in {time.monotonic() - t_rep:.0f} s")
        return ceilings

    def stop_redis(self):
        """Redis is the launcher's (a child of its shell): stopped here
        with SIGINT once its scenarios are done, waited for by its pid."""
        pid = self.a.redis_pid
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGINT)
        for _ in range(50):
            if not pid_alive(pid):
                return
            time.sleep(0.1)
        log(f"pid {pid} did not stop on SIGINT within 5 s; killing it")
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)

    def lib(self, function, *args):
        """A function of scripts/lib.sh, in a shell of its own; its status."""
        return subprocess.run(["bash", "-c", '. "$0" && "$@"', LIB, function, *map(str, args)],
                              stdin=subprocess.DEVNULL,
                              env=dict(os.environ, LOG_NAME="load", PG_BIN=self.a.pg_bin)
                              ).returncode

    def memory(self, t0):
        """A journal of JOURNAL_PETS replayed, then the mixed load with
        VmRSS sampled every 5 s."""
        s = self.s
        mem = self.work / "mem"
        mem.mkdir()
        log(f"writing a journal of {JOURNAL_PETS} pets")
        print(clients.journal(str(mem / "pets.journal"), JOURNAL_PETS), file=sys.stderr, flush=True)
        t_start = time.monotonic()
        server = self.start("mem", [self.server_bin, "--addr", "127.0.0.1:0", "--keys", self.keys,
                                    "--data", mem, "--fsync", "never"])
        log(f"petstore-server (durable, fsync never) at {server.base} (pid {server.pid}), "
            f"replayed in about {time.monotonic() - t_start:.0f} s")
        if self.count(server.base, JOURNAL_PETS - 10) != 10:
            die(f"the server did not replay exactly {JOURNAL_PETS} pets")
        rss_start = clients.vmrss_kib(server.pid)
        log(f"VmRSS after start: {rss_start // 1024} MiB")

        self.mem_samples = self.work / "mem_samples.jsonl"
        mixed_results = self.work / "mixed.jsonl"
        self.mem_samples.write_text("")
        mixed_results.write_text("")
        ready, done = self.work / "mixed.ready", self.work / "mixed.done"
        log(f"mixed load for {s.mixed_secs} s at {MIXED_CONNS} connections, VmRSS every 5 s")
        watch = self.spawn([sys.executable, LOAD_PY, "memwatch", "--pid", server.pid,
                            "--base", server.base, "--key", self.key,
                            "--start-id", JOURNAL_PETS, "--interval", 5,
                            "--duration", s.mixed_secs, "--ready-file", ready,
                            "--stop-file", done, "--out", self.mem_samples],
                           sys.stderr, sys.stderr)
        for _ in range(300):
            if ready.exists():
                break
            if watch.poll() is not None:
                die("the memory sampler exited before its first sample")
            time.sleep(0.1)
        if not ready.exists():
            die("the memory sampler took no first sample within 30 s")
        mixed_log = self.out / f"mixed-c{MIXED_CONNS}.log"
        before = cpu_ticks(server.pid)
        status = self.run_wrk(mixed_log, s.mixed_secs, MIXED_CONNS, self.work / "mixed.lua",
                              server.base + "/v1/pets", [JOURNAL_PETS])
        after = cpu_ticks(server.pid)
        done.touch()
        watch_status = self.wait(watch)
        if watch_status != 0:
            die(f"the memory sampler failed (status {watch_status})")
        self.record(mixed_results, "wrk", mixed_log, "mixed", MIXED_CONNS, "server", 1,
                    after - before, status)
        self.stop(server.proc, signal.SIGTERM)
        (self.work / "mem_meta.json").write_text(json.dumps({
            "pets": JOURNAL_PETS, "secs": s.mixed_secs, "conns": MIXED_CONNS,
            "rss_after_start_kib": rss_start, "mixed_results": str(mixed_results)}) + "\n")
        log(f"all done in {time.monotonic() - t0:.0f} s (after the build); "
            f"load average {loadavg()}")

    def header(self, title, wrk_line, before=None):
        cores, model = machine()
        return [
            title,
            "",
            f"- command: `{command_line()}`",
            f"- date: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}",
            f"- machine: {cores} cores ({model}), load average {self.loadavg} before the run, "
            f"{loadavg()} at its end",
            f"- commit: {commit_text(before)}",
            f"- wrk: {wrk_line}",
        ]

    def publish(self, name, header, produce):
        """Writes the report NAME (HEADER, a blank line, what PRODUCE
        prints) beside the logs and prints it; its status."""
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                status = produce()
        except Exception:
            traceback.print_exc()
            status = 1
        text = "".join(line + "\n" for line in header) + "\n" + buf.getvalue()
        (self.out / name).write_text(text, encoding="utf-8")
        print(flush=True)
        sys.stdout.write(text)
        sys.stdout.flush()
        if status != 0:
            print(file=sys.stderr)
            die(f"errors in the runs above (report status {status}); logs in {self.out}")
        log(f"report written to {self.out / name}")
        return 0

    def write_report(self):
        s = self.s
        shutil.copy(self.results, self.out / "results.jsonl")
        shutil.copy(self.mem_samples, self.out / "memory.jsonl")
        header = self.header(
            "## petstore load benchmark",
            f"`wrk -t{THREADS} -cC -d{s.secs}s --latency`, {s.rounds} round(s) per scenario and "
            "connection count, server and baseline (and page_only at the first count) interleaved",
            s.before or None)
        header.append(
            "- baseline: raw hyper answering every request with the server's own "
            "`GET /v1/pets?limit=20` response, headers and page, byte for byte "
            "(`baseline-response.http` beside this report); page_only: the same page with "
            "only a Content-Type (the earlier ruler)")
        w = self.work
        return self.publish("report.md", header, lambda: report.report(
            str(self.results), memory=str(self.mem_samples), memory_meta=str(w / "mem_meta.json"),
            batches=str(w / "batches.json"), redis_batches=str(w / "redis_batches.json"),
            backgrounds=str(self.out), tx_batches=str(w / "tx_batches.json")))

    def keyed(self):
        """LOAD_KEYED=1: keyed POST /v1/pets against unkeyed on the durable
        server and a replica, at the first connection count, and what a
        kept key costs in memory and in PostgreSQL."""
        s = self.s
        a = self.a
        if not a.pg_url:
            die("LOAD_KEYED=1 needs the PostgreSQL that scripts/bench/load starts")
        conns = s.conns[0]
        t0 = time.monotonic()
        self.loadavg = loadavg()
        log(f"keyed POST against unkeyed: {s.rounds} round(s) of {s.secs} s at {conns} "
            f"connections; load average {self.loadavg}")
        (self.work / "durable").mkdir()
        durable = self.start("durable", [self.server_bin, "--addr", "127.0.0.1:0",
                                         "--keys", self.keys, "--data", self.work / "durable",
                                         "--fsync", "always"])
        replica = self.start("replica", [self.server_bin, "--addr", "127.0.0.1:0",
                                         "--keys", self.keys, "--postgres", a.pg_url])
        port = re.search(r":(\d+)/", a.pg_url).group(1)
        log(f"durable at {durable.base}, replica at {replica.base} (PostgreSQL at 127.0.0.1:{port})")

        # Plain and keyed back to back per target, their order swapped
        # every round: the same request made in Lua either way, so the
        # ratio is the key's cost alone.
        for r in range(1, s.rounds + 1):
            for target, server in (("durable", durable), ("replica", replica)):
                for kind in (("plain", "keyed") if r % 2 == 1 else ("keyed", "plain")):
                    self.measure(f"post_{kind}", conns, target, r, server, "/v1/pets",
                                 "post_keyed", [kind, f"r{r}-{target}"])

        def psql(query):
            r = subprocess.run([Path(a.pg_bin) / "psql", "-X", "-At", a.pg_url, "-c", query],
                               capture_output=True, text=True, stdin=subprocess.DEVNULL)
            if r.returncode != 0:
                die(f"psql {query!r}: {r.stderr.strip()}")
            return int(r.stdout.strip())
        kept_rows = psql("SELECT count(*) FROM petstore_idempotency")
        kept_bytes = psql("SELECT pg_total_relation_size('petstore_idempotency')")
        self.stop(durable.proc, signal.SIGTERM)
        self.stop(replica.proc, signal.SIGTERM)
        log(f"throughput runs done in {time.monotonic() - t0:.0f} s")

        (self.work / "mem").mkdir()
        mem = self.start("mem", [self.server_bin, "--addr", "127.0.0.1:0", "--keys", self.keys,
                                 "--data", self.work / "mem", "--fsync", "never"])
        rss0 = clients.vmrss_kib(mem.pid)
        self.seed(mem.base, s.keyed_n, 8, 300, "unkeyed creates failed")
        rss1 = clients.vmrss_kib(mem.pid)
        self.seed(mem.base, s.keyed_n, 8, 300, "keyed creates failed", "--keyed", "mem")
        rss2 = clients.vmrss_kib(mem.pid)
        kept = "?"
        with contextlib.suppress(*CLIENT_ERRORS):
            conn = clients.connect(mem.base)
            conn.request("GET", "/metrics")
            for line in conn.getresponse().read().decode("utf-8", "replace").splitlines():
                if line.startswith("petstore_idempotency_keys_kept "):
                    kept = line.split()[1]
                    break
        self.stop(mem.proc, signal.SIGTERM)
        memory = self.work / "keyed_memory.json"
        memory.write_text(json.dumps({
            "n": s.keyed_n, "rss0_kib": rss0, "rss1_kib": rss1, "rss2_kib": rss2,
            "kept_metric": kept, "pg_rows": kept_rows, "pg_bytes": kept_bytes}) + "\n")

        shutil.copy(self.results, self.out / "results.jsonl")
        header = self.header(
            "## petstore load benchmark: keyed POST",
            f"`wrk -t{THREADS} -c{conns} -d{s.secs}s --latency -s post_keyed.lua -- plain|keyed "
            f"RUN`, {s.rounds} round(s), plain and keyed back to back per target, their order "
            "swapped each round")
        return self.publish("report-keyed.md", header,
                            lambda: report.keyed_report(str(self.results), str(memory)))

    def go(self):
        self.prepare()
        return self.keyed() if self.s.keyed else self.single_node()


def main(args):
    """The run, with the launcher's ARGS (load.py run --help); its exit
    status."""
    try:
        sw = switches.read(os.environ)
    except switches.SwitchError as e:
        print(f"== load: FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    run = Run(sw, args)

    def stop_on(signum, _frame):
        raise SystemExit(128 + signum)
    signal.signal(signal.SIGTERM, stop_on)
    try:
        return run.go()
    except Failed as e:
        print(f"== load: FAILED: {e}", file=sys.stderr, flush=True)
        return 1
    except KeyboardInterrupt:
        return 130
    finally:
        # The clean-up runs to its end.
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        run.cleanup()
