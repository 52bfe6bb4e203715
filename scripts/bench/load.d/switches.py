"""The load benchmark's switches (environment variables), read and checked
in one place, and what a run of them costs: the examples with their run
times, and the bound that refuses a run too long for the machine it
shares. docs/load.md's switch table lists the same switches (a test
keeps the two alike); `scripts/bench/load --help` prints both tables.
"""

import dataclasses
import re

# wrk's threads: every connection count must give each at least one.
THREADS = 2
# The replicas are measured at this connection count only.
REPLICA_CONNS = 64

# name, default, default under LOAD_QUICK=1 (None: the same), what it does.
SWITCHES = [
    ("LOAD_QUICK", "0", None,
     "1: the smoke test, the quick defaults of this table"),
    ("LOAD_SECS", "3", "2", "seconds per wrk run"),
    ("LOAD_ROUNDS", "5", "1", "rounds per scenario and target"),
    ("LOAD_MIXED_SECS", "60", "10", "seconds of the mixed load of the memory check"),
    ("LOAD_CONNECTIONS", "64 256", "64", "connection counts, space-separated"),
    ("LOAD_OBSERVABILITY", "0", None,
     "1: also the list with `--metrics false` and with `--access-log`"),
    ("LOAD_BEFORE", "", None,
     "a git revision: also its server, in the rounds of the first connection count"),
    ("LOAD_TRANSITIONS", "0", None,
     "1: also the transitions (reserve, release, sell), at the first connection count"),
    ("LOAD_REPLICAS", "0", None,
     "1: also the replicas (PostgreSQL, Redis, scripts/cluster), at 64 connections"),
    ("LOAD_KEYED", "0", None,
     "1: instead of the rest, keyed POST against unkeyed and the memory of a kept key"),
    ("LOAD_KEYED_N", "50000", None, "creates of each kind in LOAD_KEYED's memory check"),
    ("LOAD_SKIP_BUILD", "0", None, "1: use the binaries already in target/release"),
]

# The commands docs/load.md shows, and how long each runs after the build
# on the project's 2-core machine (measured; none for LOAD_BEFORE, which
# depends on what the other revision builds). The one place they are
# stated: docs/load.md points here.
EXAMPLES = [
    ("scripts/bench/load", "the full run", "about 7.5 minutes"),
    ("LOAD_QUICK=1 scripts/bench/load", "smoke test", "about 1.5 minutes"),
    ("LOAD_BEFORE=4759eb9 LOAD_CONNECTIONS=64 scripts/bench/load",
     "before/after of a change", None),
    ("LOAD_REPLICAS=1 LOAD_CONNECTIONS=64 scripts/bench/load",
     "replicas against the single node", "about 9.5 minutes"),
    ("LOAD_TRANSITIONS=1 LOAD_CONNECTIONS=64 scripts/bench/load",
     "pets that change hands", "about 8 minutes"),
    ("LOAD_REPLICAS=1 LOAD_TRANSITIONS=1 LOAD_ROUNDS=3 LOAD_CONNECTIONS=64 scripts/bench/load",
     "both, and the replica's transitions", "about 10 minutes"),
    ("LOAD_KEYED=1 LOAD_CONNECTIONS=64 scripts/bench/load",
     "keyed POST against unkeyed, memory per kept key", "about 4 minutes"),
]


class SwitchError(Exception):
    """Switches the benchmark refuses, and why."""


@dataclasses.dataclass(frozen=True)
class Switches:
    quick: bool
    secs: int
    rounds: int
    mixed_secs: int
    conns: tuple
    observability: bool
    before: str
    transitions: bool
    replicas: bool
    keyed: bool
    keyed_n: int
    skip_build: bool

    def runs(self):
        """wrk runs (and the runs of pgbench and redis-benchmark): 5
        scenarios x connection counts x rounds x (server, baseline);
        page_only (and before) in the 4 targeted scenarios at the first
        count; the observability variants; the replicas' 12 a round (list
        on 5 targets, the many-keys list on 3, get on 1, POST on 3); the
        transitions' 9 a round at the first count (the durable
        transitions, and 4 list scenarios on server and baseline); both
        together, the replica's transitions, 1 a round."""
        r = self.rounds
        return (5 * len(self.conns) * r * 2 + 4 * r * (2 if self.before else 1)
                + (2 * r * 2 if self.observability else 0)
                + (12 * r if self.replicas else 0)
                + (9 * r if self.transitions else 0)
                + (r if self.replicas and self.transitions else 0))

    def estimate(self):
        """Seconds the run takes after the build, at most: the runs, with
        about half a second around each; the mixed load; about a minute of
        seeding, journal writing, replay and start-ups; with the replicas
        about 70 s of initdb, scripts/cluster, seeding through PostgreSQL
        and start-ups; with the transitions about 15 s of seeding and the
        background client's start-ups; with both, about 20 s to seed the
        replica's pets."""
        runs = self.runs()
        return (runs * self.secs + runs // 2 + self.mixed_secs + 60
                + (70 if self.replicas else 0) + (15 if self.transitions else 0)
                + (20 if self.replicas and self.transitions else 0))

    def bound(self):
        """The most seconds a run may be estimated at: 570, 2 minutes more
        with the replicas, 3 with the transitions, half a minute with both."""
        return ((690 if self.replicas else 570) + (180 if self.transitions else 0)
                + (30 if self.replicas and self.transitions else 0))


def _positive(text):
    return re.fullmatch(r"[1-9][0-9]*", text) is not None


def read(env):
    """The switches of ENV (a mapping such as os.environ), checked; raises
    SwitchError with the reason when the benchmark cannot run them. An
    empty value counts as unset, as in the shell."""
    def get(name):
        value = env.get(name, "")
        if value:
            return value
        default, quick_default = next((d, q) for n, d, q, _ in SWITCHES if n == name)
        return quick_default if quick and quick_default is not None else default

    quick = env.get("LOAD_QUICK", "") == "1"
    secs, rounds, mixed = get("LOAD_SECS"), get("LOAD_ROUNDS"), get("LOAD_MIXED_SECS")
    if not all(_positive(v) for v in (secs, rounds, mixed)):
        raise SwitchError("LOAD_SECS, LOAD_ROUNDS and LOAD_MIXED_SECS must be positive integers")
    words = get("LOAD_CONNECTIONS").split()
    if not words:
        raise SwitchError("LOAD_CONNECTIONS names no connection count")
    for c in words:
        if not (_positive(c) and THREADS <= int(c) <= 1000):
            raise SwitchError(f"LOAD_CONNECTIONS: {c} is not a count in {THREADS}..1000")
    replicas = get("LOAD_REPLICAS") == "1"
    if replicas and str(REPLICA_CONNS) not in words:
        raise SwitchError(
            f"LOAD_REPLICAS=1 measures at {REPLICA_CONNS} connections: "
            f"LOAD_CONNECTIONS must include {REPLICA_CONNS}")
    keyed = get("LOAD_KEYED") == "1"
    keyed_n = get("LOAD_KEYED_N")
    if keyed and not _positive(keyed_n):
        raise SwitchError("LOAD_KEYED_N must be a positive integer")
    s = Switches(
        quick=quick, secs=int(secs), rounds=int(rounds), mixed_secs=int(mixed),
        conns=tuple(int(c) for c in words),
        observability=get("LOAD_OBSERVABILITY") == "1",
        before=get("LOAD_BEFORE"),
        transitions=get("LOAD_TRANSITIONS") == "1",
        replicas=replicas,
        keyed=keyed,
        keyed_n=int(keyed_n) if keyed else 0,
        skip_build=get("LOAD_SKIP_BUILD") == "1",
    )
    if not (s.secs <= 60 and s.mixed_secs <= 300 and s.estimate() <= s.bound()):
        raise SwitchError(
            f"these knobs would run about {s.estimate()} s; the run is bounded "
            f"to under {(s.bound() + 30) // 60} minutes")
    return s


def example_env(command):
    """The switches an example command line sets, as a mapping."""
    return dict(word.split("=", 1) for word in command.split() if "=" in word)


def help_text():
    """What `scripts/bench/load --help` prints."""
    lines = [
        "scripts/bench/load: petstore-server under HTTP load against the baseline,",
        "raw hyper answering the same bytes with no work at all; every verdict is",
        "a ratio of runs made next to each other. What it runs and how to read",
        "it: docs/load.md. Its switches are environment variables:",
        "",
    ]
    width = max(len(name) for name, *_ in SWITCHES)
    for name, default, quick_default, what in SWITCHES:
        shown = default if default else "(unset)"
        if quick_default is not None:
            shown += f" (quick: {quick_default})"
        lines.append(f"  {name:<{width}}  {shown:<18}  {what}")
    lines += ["", "Examples, and their run times after the build:", ""]
    for command, what, takes in EXAMPLES:
        lines.append(f"  {command}")
        lines.append(f"      {what}" + (f": {takes}" if takes else ""))
    lines += [
        "",
        "It refuses switches it estimates at more than 10 minutes (12 with",
        "LOAD_REPLICAS=1, 3 more with LOAD_TRANSITIONS=1, half a minute more",
        "with both). The report: target/load/report.md (report-keyed.md).",
    ]
    return "\n".join(lines) + "\n"
