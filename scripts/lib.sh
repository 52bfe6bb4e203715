# shellcheck shell=bash
# What the scripts share: their log lines, how they fail, free ports, and
# the private PostgreSQL and Redis several of them start. Sourced, never
# run:
#
#   ROOT=...; . "$ROOT/scripts/lib.sh"
#
# It sets no shell option and no trap: each script keeps its own
# `set -euo pipefail` and its own clean-up, which calls
# stop_private_servers for the servers started here.
#
#   log MESSAGE...              `== NAME: MESSAGE` on stderr
#   die MESSAGE...              `== NAME: FAILED: MESSAGE` on stderr, exit 1
#   die_with STATUS MESSAGE...  the same, exit STATUS (2: a usage error)
#   free_port [--with-bus]      a free TCP port on 127.0.0.1
#   wait_for SECONDS WHAT COMMAND...
#                               runs COMMAND every WAIT_FOR_INTERVAL s
#                               (default 0.1) until it succeeds; dies after
#                               SECONDS, adding WAIT_FOR_HINT when set
#   as_postgres COMMAND...      COMMAND as the postgres user when root
#   find_pg_bin                 PostgreSQL's newest server binaries' directory
#   start_postgres DIR [SETTING...]
#   stop_postgres DIR [MODE]
#   start_redis DIR [OPTION...]
#   stop_redis PID
#   stop_private_servers [MODE] every PostgreSQL and Redis started here
#
# NAME is LOG_NAME when the script sets it before sourcing this file,
# else the script's file name.

LOG_NAME="${LOG_NAME:-$(basename "$0")}"

log() { printf '== %s: %s\n' "$LOG_NAME" "$*" >&2; }

die() { die_with 1 "$@"; }

die_with() {
    local status="$1"
    shift
    printf '== %s: FAILED: %s\n' "$LOG_NAME" "$*" >&2
    exit "$status"
}

# The port is free when asked; a server bound to it later may still lose
# it to another process in between, which on a test machine is rare
# enough. --with-bus: a port whose +10000 is free too, the bus a Redis
# Cluster node opens beside its own.
free_port() {
    if [ "${1:-}" = --with-bus ]; then
        python3 -c '
import socket
while True:
    a = socket.socket(); a.bind(("127.0.0.1", 0)); p = a.getsockname()[1]
    if p + 10000 > 65535: a.close(); continue
    b = socket.socket()
    try:
        b.bind(("127.0.0.1", p + 10000))
    except OSError:
        a.close(); b.close(); continue
    a.close(); b.close(); print(p); break'
    else
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    fi
}

wait_for() {
    local secs="$1" what="$2"
    shift 2
    local deadline=$((SECONDS + secs))
    until "$@" >/dev/null 2>&1; do
        [ "$SECONDS" -lt "$deadline" ] || die "gave up waiting for $what after $secs s${WAIT_FOR_HINT:+ ($WAIT_FOR_HINT)}"
        sleep "${WAIT_FOR_INTERVAL:-0.1}"
    done
}

# PostgreSQL refuses to run as root: as root, its commands run as the
# postgres user that Debian's package makes.
as_postgres() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

# Debian's layout, /usr/lib/postgresql/VERSION/bin; empty when there is
# none. (scripts/test searches the list tests/common/postgres.rs does.)
find_pg_bin() {
    local found=(/usr/lib/postgresql/*/bin/initdb)
    [ -e "${found[0]}" ] || return 0
    dirname "$(printf '%s\n' "${found[@]}" | sort -V | tail -n1)"
}

PRIVATE_PG_DIRS=()
PRIVATE_REDIS_PIDS=()

# start_postgres DIR [SETTING...]: initdb into DIR/pg and start it on a
# free loopback port, its socket and log in DIR/pg-socket (written by
# the postgres user when root, so DIR is made traversable); each SETTING
# (`fsync=off`) is passed as `-c SETTING`. Sets PG_BIN, PG_PORT and
# PG_URL (the postgres database, user postgres, no password), which its
# callers read.
# shellcheck disable=SC2034
start_postgres() {
    local dir="$1"
    shift
    PG_BIN="${PG_BIN:-$(find_pg_bin)}"
    [ -x "$PG_BIN/initdb" ] \
        || die "PostgreSQL's server binaries are missing (Debian: apt-get install postgresql)"
    mkdir -p "$dir/pg" "$dir/pg-socket"
    if [ "$(id -u)" = 0 ]; then
        chown postgres "$dir/pg" "$dir/pg-socket"
        chmod 755 "$dir"
    fi
    PRIVATE_PG_DIRS+=("$dir")
    as_postgres "$PG_BIN/initdb" -D "$dir/pg" -U postgres --auth=trust -E UTF8 \
        >"$dir/initdb.log" 2>&1 || die "initdb failed: $(tail -n3 "$dir/initdb.log")"
    PG_PORT="$(free_port)"
    local options="-p $PG_PORT -k $dir/pg-socket -c listen_addresses=127.0.0.1" setting
    for setting in "$@"; do
        options+=" -c $setting"
    done
    as_postgres "$PG_BIN/pg_ctl" -D "$dir/pg" -l "$dir/pg-socket/postgres.log" -w -t 60 \
        -o "$options" start >/dev/null \
        || die "PostgreSQL did not start: $(tail -n3 "$dir/pg-socket/postgres.log")"
    PG_URL="postgres://postgres@127.0.0.1:$PG_PORT/postgres"
}

# stop_postgres DIR [MODE]: pg_ctl stop (MODE fast by default; immediate
# skips the checkpoint of a server about to be deleted), bounded to 60 s.
# Nothing to do when it is not running.
stop_postgres() {
    local dir="$1" mode="${2:-fast}"
    [ -f "$dir/pg/postmaster.pid" ] || return 0
    as_postgres timeout 60 "${PG_BIN:-$(find_pg_bin)}/pg_ctl" -D "$dir/pg" -m "$mode" -w stop \
        >/dev/null 2>&1
}

# start_redis DIR [OPTION...]: redis-server on a free loopback port, in
# the foreground of a background job, with no snapshots, its data and
# log in DIR; each OPTION goes to redis-server (`--appendonly yes`).
# Sets REDIS_PORT and REDIS_PID once it answers PING. REDIS_CLUSTER_BUS=1
# takes a port whose bus port is free too; a command prefix in the array
# REDIS_ON (`taskset -c 1`) runs it.
start_redis() {
    local dir="$1"
    shift
    mkdir -p "$dir"
    REDIS_PORT="$(free_port ${REDIS_CLUSTER_BUS:+--with-bus})"
    ${REDIS_ON[@]+"${REDIS_ON[@]}"} redis-server --port "$REDIS_PORT" --bind 127.0.0.1 \
        --dir "$dir" --save '' --logfile "$dir/redis.log" --daemonize no "$@" \
        >"$dir/redis.out" 2>&1 &
    REDIS_PID=$!
    PRIVATE_REDIS_PIDS+=("$REDIS_PID")
    local _
    for _ in $(seq 100); do
        redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1 && return 0
        kill -0 "$REDIS_PID" 2>/dev/null || break
        sleep 0.1
    done
    die "redis-server on port $REDIS_PORT did not answer within 10 s: $(tail -n3 "$dir/redis.out" "$dir/redis.log" 2>/dev/null)"
}

# stop_redis PID: SIGTERM (Redis writes its append-only file and exits),
# SIGKILL after 5 s. A PID that is no longer a redis-server (stopped
# already, its number since reused) is left alone.
stop_redis() {
    local pid="$1" _
    case "$(cat "/proc/$pid/comm" 2>/dev/null)" in
        redis*) ;;
        *) return 0 ;;
    esac
    kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
}

# stop_private_servers [MODE]: for a script's clean-up; MODE as for
# stop_postgres.
stop_private_servers() {
    local pid dir
    for pid in ${PRIVATE_REDIS_PIDS[@]+"${PRIVATE_REDIS_PIDS[@]}"}; do
        stop_redis "$pid"
    done
    for dir in ${PRIVATE_PG_DIRS[@]+"${PRIVATE_PG_DIRS[@]}"}; do
        stop_postgres "$dir" "${1:-fast}" || true
    done
}
