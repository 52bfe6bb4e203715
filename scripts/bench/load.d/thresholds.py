"""Every target the load benchmark judges a run by, in one place.

A target is a ratio of two runs made next to each other in the same
round (the median of the rounds' ratios): absolute figures on a shared
machine move too much to judge. A missed target is reported, never an
error: the run fails only on errors (non-2xx, socket errors, no result).
docs/load.md says where each comes from.
"""

# The single node against its ruler (the baseline answering the same
# bytes), per scenario: (the least req/s ratio, the most p99 ratio or
# None). POST durable has none: it is bound by fdatasync.
SINGLE_NODE = {
    "list": (0.85, 1.5),
    "list_sold": (0.85, 1.5),
    "get_id": (0.9, None),
    "post_mem": (0.7, None),
}

# LOAD_REPLICAS: (label, numerator (scenario, target), denominator
# (scenario, target), the least ratio or None). The two ran in the same
# round.
REPLICA_RATIOS = [
    ("replica list / single-node list", ("list", "replica"), ("list", "server"), 0.9),
    ("replica get / single-node get", ("get_id", "replica"), ("get_id", "server"), 0.9),
    ("replica POST / pgbench, one transaction per create", ("post_mem", "replica"),
     ("post_mem", "pgbench"), 10.0),
    ("durable POST (fsync always) / in-memory POST", ("post_mem", "durable"),
     ("post_mem", "server"), 0.5),
    ("replica + Redis list / single-node list", ("list", "replica_redis"),
     ("list", "server"), 0.4),
    ("replica + Redis list / Redis ceiling (redis-benchmark, the same EVALSHA)",
     ("list", "replica_redis"), ("list", "redis_ceiling"), None),
    ("replica + Redis list / Redis ceiling pipelined by 16 (-P 16)",
     ("list", "replica_redis"), ("list", "redis_ceiling_p16"), None),
    ("replica list / baseline", ("list", "replica"), ("list", "baseline"), None),
    ("replica + Redis list / replica list", ("list", "replica_redis"),
     ("list", "replica"), None),
    ("cluster (scripts/cluster, through HAProxy) list / single-node list",
     ("list", "cluster"), ("list", "server"), None),
    ("replica + Redis list, 64 keys in turn / single-node list, 64 keys",
     ("list_keys", "replica_redis"), ("list_keys", "server"), None),
]

# LOAD_TRANSITIONS: a list with no transitions beside it against the
# ruler; the same list while 1,000 transitions a second are made; the
# transitions made a second against the same server's POST req/s (the
# durable server's, and a replica's).
TX_QUIET_MIN = 0.95
TX_BUSY_MIN = 0.8
TX_DURABLE_MIN = 0.5
# The background client's pace counts as kept at this share of its rate;
# below it, a list's figure under transitions would flatter the server
# and is reported NOT MEASURED.
TX_PACE_KEPT = 0.9

# Memory: steady-state RSS growth per added pet above this is called a
# leak. A pet costs ~100 bytes (its JSON in the arena plus its index
# entries); the margin covers allocator slack and vector growth.
LEAK_BYTES_PER_PET = 400

# LOAD_KEYED: keyed POST's req/s over unkeyed POST's in the same round.
KEYED_MIN = 0.8


def at_least(ratio, minimum):
    """MET when RATIO (None: not measured) reaches MINIMUM."""
    return "MET" if ratio is not None and ratio >= minimum else "MISSED"


def single_node_verdict(scenario, ratio, p99_ratio):
    """The target's text and the verdict of a single-node scenario, or
    ("(none)", None) for a scenario without a target."""
    target = SINGLE_NODE.get(scenario)
    if target is None:
        return "(none)", None
    min_ratio, max_p99 = target
    text = f"ratio >= {min_ratio}"
    ok = ratio is not None and ratio >= min_ratio
    if max_p99 is not None:
        text += f", p99 ratio <= {max_p99}"
        ok = ok and p99_ratio is not None and p99_ratio <= max_p99
    return text, "MET" if ok else "MISSED"


def single_node_summary():
    """The targets in a sentence, as the report's summary line gives them."""
    lst, get, post = SINGLE_NODE["list"], SINGLE_NODE["get_id"], SINGLE_NODE["post_mem"]
    return (f"list (with and without filter) >= {lst[0]} of baseline req/s and "
            f"p99 <= {lst[1]}x baseline's; get by id >= {get[0]}; "
            f"POST in memory >= {post[0]}; POST durable: no target.")
