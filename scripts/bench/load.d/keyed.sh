# LOAD_KEYED=1 scripts/bench/load: keyed POST /v1/pets against unkeyed, and what
# a kept key costs. Sourced by scripts/bench/load once its binaries, helpers and
# clean-up are ready; runs instead of its other scenarios.
#
# Targets, at LOAD_CONNECTIONS' first count (64 by default):
#   durable  petstore-server --data DIR --fsync always (the journal: a
#            kept key rides in its pet's record, in the same group commit)
#   replica  petstore-server --postgres on a private PostgreSQL (fsync
#            on, as scripts/bench/load's replicas; a kept key is a row in the
#            pet's transaction)
# Each round runs, per target, post_keyed.lua `plain` and `keyed` one
# after the other (their order swapped every round): the same request
# made in Lua either way, a new Idempotency-Key on each keyed one, so the
# ratio keyed/plain is the cost of the key alone. Target: >= 0.8.
#
# Memory: a fresh durable server (--fsync never); VmRSS after start,
# after KEYED_N unkeyed creates and after KEYED_N keyed ones: bytes per
# kept key = ((keyed growth) - (unkeyed growth)) / KEYED_N, the pet's own
# cost taken out. PostgreSQL: the table's bytes (heap and indexes) per
# row after the replica's runs.
KEYED_N="${LOAD_KEYED_N:-50000}"
KEYED_CONNS="${CONNS%% *}"
PG_BIN="$(find_pg_bin)"
[ -n "$PG_BIN" ] || die "LOAD_KEYED=1 needs PostgreSQL's server binaries (Debian: apt-get install postgresql)"
export PETSTORE_MAX_CONNECTIONS_PER_ADDRESS=1024
T0=$SECONDS
LOADAVG="$(cut -d' ' -f1-3 /proc/loadavg)"
log "keyed POST against unkeyed: ${ROUNDS} round(s) of ${SECS} s at $KEYED_CONNS connections; load average $LOADAVG"

mkdir -p "$WORK/durable"
start durable "$SERVER" --addr 127.0.0.1:0 --keys "$WORK/keys.json" \
    --data "$WORK/durable" --fsync always
DPID=$STARTED_PID DBASE=$STARTED_BASE

PG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/petstore-load-pg.XXXXXX")"
start_postgres "$PG_DIR"
start replica "$SERVER" --addr 127.0.0.1:0 --keys "$WORK/keys.json" --postgres "$PG_URL"
PPID_R=$STARTED_PID PBASE=$STARTED_BASE
log "durable at $DBASE, replica at $PBASE (PostgreSQL at 127.0.0.1:$PG_PORT)"

for r in $(seq 1 "$ROUNDS"); do
    for target in durable replica; do
        if [ "$target" = durable ]; then pid=$DPID base=$DBASE; else pid=$PPID_R base=$PBASE; fi
        if [ $((r % 2)) = 1 ]; then order="plain keyed"; else order="keyed plain"; fi
        for kind in $order; do
            measure "post_$kind" "$KEYED_CONNS" "$target" "$r" "$pid" "$base" "/v1/pets" \
                post_keyed "$kind" "r$r-$target"
        done
    done
done
KEPT_ROWS="$("$PG_BIN/psql" -X -At "$PG_URL" -c 'SELECT count(*) FROM petstore_idempotency')"
KEPT_BYTES="$("$PG_BIN/psql" -X -At "$PG_URL" -c "SELECT pg_total_relation_size('petstore_idempotency')")"
stop "$DPID" TERM
stop "$PPID_R" TERM
log "throughput runs done in $((SECONDS - T0)) s"

mkdir -p "$WORK/mem"
start mem "$SERVER" --addr 127.0.0.1:0 --keys "$WORK/keys.json" --data "$WORK/mem" --fsync never
MPID=$STARTED_PID MBASE=$STARTED_BASE
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$MPID/status"; }
rss0="$(rss)"
timeout 300 python3 "$HELPER" seed "$MBASE" "$KEY" "$KEYED_N" 8 >&2 || die "unkeyed creates failed"
rss1="$(rss)"
timeout 300 python3 "$HELPER" seed "$MBASE" "$KEY" "$KEYED_N" 8 --keyed mem >&2 || die "keyed creates failed"
rss2="$(rss)"
kept_metric="$(curl -s "$MBASE/metrics" 2>/dev/null | awk '/^petstore_idempotency_keys_kept / { print $2 }')"
stop "$MPID" TERM
printf '{"n":%d,"rss0_kib":%d,"rss1_kib":%d,"rss2_kib":%d,"kept_metric":"%s","pg_rows":%d,"pg_bytes":%d}\n' \
    "$KEYED_N" "$rss0" "$rss1" "$rss2" "${kept_metric:-?}" "$KEPT_ROWS" "$KEPT_BYTES" >"$WORK/keyed_memory.json"

cp "$RESULTS" "$OUT_DIR/results.jsonl"
report_status=0
{
    echo "## petstore load benchmark: keyed POST"
    echo
    echo "- command: \`$(env | grep -E '^LOAD_' | sort | tr '\n' ' ')scripts/bench/load\`"
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC')"
    echo "- machine: $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //')), load average $LOADAVG before the run, $(cut -d' ' -f1-3 /proc/loadavg) at its end"
    echo "- commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- 2>/dev/null || echo ' + uncommitted changes')"
    echo "- wrk: \`wrk -t$THREADS -c$KEYED_CONNS -d${SECS}s --latency -s post_keyed.lua -- plain|keyed RUN\`, ${ROUNDS} round(s), plain and keyed back to back per target, their order swapped each round"
    echo
    python3 "$HELPER" keyed-report "$RESULTS" --memory "$WORK/keyed_memory.json" || report_status=$?
} >"$OUT_DIR/report-keyed.md"
echo
cat "$OUT_DIR/report-keyed.md"
[ "$report_status" = 0 ] || die "errors in the runs above (report status $report_status); logs in $OUT_DIR"
log "report written to $OUT_DIR/report-keyed.md"
