#!/usr/bin/env bash
# A throwaway PostgreSQL for wop's tests and CI.
#
#   bash .ci/postgres.sh start   # install if missing, initdb, start; prints the URL
#   bash .ci/postgres.sh url     # prints the URL of the running instance
#   bash .ci/postgres.sh stop    # stops it and deletes its data directory
#
# Typical use (what .ci/run should do before `cargo test`):
#   export WOP_TEST_POSTGRES_URL="$(bash .ci/postgres.sh start)"
#   trap 'bash .ci/postgres.sh stop' EXIT
#
# Only the URL goes to stdout; everything else goes to stderr.
#
# - Installs Debian's PostgreSQL if no server binaries are found
#   (`apt-get update` once, then `apt-get install -y postgresql-15` when the
#   archive has that major version -- bookworm's -- else `postgresql`). The
#   exact Debian revision is not pinned: the archive drops superseded
#   security revisions, so an exact pin would stop installing.
# - Runs the server as a non-root user (postgres refuses root): `postgres`
#   when that user exists (the Debian package creates it), else a system
#   user `wop-pg` is created. When not run as root, runs as the caller.
# - The cluster lives in $WOP_PG_DIR (default /tmp/wop-postgres-<uid>),
#   listens on 127.0.0.1 on a free port (and a unix socket in that
#   directory), password (SCRAM) auth for the superuser `wop`, database `wop`.
# - fsync stays on (the default): durability numbers measured against it
#   are real.
set -euo pipefail

DIR="${WOP_PG_DIR:-${TMPDIR:-/tmp}/wop-postgres-$(id -u)}"
DATA="$DIR/data"

log() { echo "postgres.sh: $*" >&2; }
die() { echo "postgres.sh: error: $*" >&2; exit 1; }

find_bindir() {
    local d
    d=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$d" && -x "$d/initdb" && -x "$d/pg_ctl" ]]; then
        echo "$d"
    fi
}

install_postgres() {
    [[ $(id -u) -eq 0 ]] || die "PostgreSQL is not installed and installing needs root (apt-get install -y postgresql)"
    command -v apt-get >/dev/null || die "PostgreSQL is not installed and apt-get is not available"
    log "installing PostgreSQL (Debian package)"
    local marker=/var/lib/apt/lists/.wop-postgres-updated
    if [[ ! -e "$marker" ]]; then
        DEBIAN_FRONTEND=noninteractive apt-get update >&2
        touch "$marker"
    fi
    local pkg=postgresql
    if apt-cache show postgresql-15 >/dev/null 2>&1; then
        pkg=postgresql-15
    fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "$pkg" >&2
}

# Runs a command as the server's (non-root) user.
RUN_AS=""
as_user() {
    if [[ -n "$RUN_AS" ]]; then
        runuser -u "$RUN_AS" -- "$@"
    else
        "$@"
    fi
}

pick_user() {
    if [[ $(id -u) -ne 0 ]]; then
        RUN_AS=""
    elif id postgres >/dev/null 2>&1; then
        RUN_AS=postgres
    else
        id wop-pg >/dev/null 2>&1 || useradd --system --no-create-home --shell /usr/sbin/nologin wop-pg
        RUN_AS=wop-pg
    fi
}

url() {
    [[ -f "$DIR/port" && -f "$DIR/password" ]] || return 1
    echo "postgres://wop:$(cat "$DIR/password")@127.0.0.1:$(cat "$DIR/port")/wop"
}

running() {
    local bindir=$1
    [[ -f "$DATA/postmaster.pid" ]] && as_user "$bindir/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

start() {
    local bindir
    bindir=$(find_bindir)
    if [[ -z "$bindir" ]]; then
        install_postgres
        bindir=$(find_bindir)
        [[ -n "$bindir" ]] || die "installed PostgreSQL but found no server binaries under /usr/lib/postgresql"
    fi
    pick_user
    if running "$bindir"; then
        log "already running ($DIR)"
        url
        return
    fi
    # A stale directory from a killed run: start over.
    rm -rf "$DIR"
    mkdir -p "$DIR/sock"
    chmod 700 "$DIR"
    od -An -tx1 -N16 /dev/urandom | tr -d ' \n' >"$DIR/password"
    if [[ -n "$RUN_AS" ]]; then chown -R "$RUN_AS" "$DIR"; fi
    log "initdb into $DATA as ${RUN_AS:-$(id -un)} ($("$bindir/postgres" --version))"
    as_user "$bindir/initdb" -D "$DATA" -U wop --auth=scram-sha-256 \
        --pwfile="$DIR/password" --no-locale -E UTF8 >"$DIR/initdb.log" 2>&1 ||
        { cat "$DIR/initdb.log" >&2; die "initdb failed"; }
    local port tries=0
    while :; do
        tries=$((tries + 1))
        port=$((20000 + RANDOM % 20000))
        if as_user "$bindir/pg_ctl" -D "$DATA" -l "$DIR/server.log" -w -t 60 \
            -o "-c listen_addresses=127.0.0.1 -p $port -k $DIR/sock -c max_connections=300" \
            start >&2; then
            break
        fi
        [[ $tries -lt 5 ]] || { tail -n 20 "$DIR/server.log" >&2; die "could not start PostgreSQL"; }
        log "port $port did not work; trying another"
    done
    echo "$port" >"$DIR/port"
    PGPASSWORD=$(cat "$DIR/password") "$bindir/psql" -qAt -h 127.0.0.1 -p "$port" -U wop \
        -d postgres -c 'CREATE DATABASE wop' >&2
    log "listening on 127.0.0.1:$port and $DIR/sock"
    url
}

stop() {
    local bindir
    bindir=$(find_bindir)
    pick_user
    if [[ -n "$bindir" && -f "$DATA/postmaster.pid" ]]; then
        as_user "$bindir/pg_ctl" -D "$DATA" -m fast -w stop >&2 || true
    fi
    rm -rf "$DIR"
    log "stopped"
}

case "${1:-}" in
start) start ;;
stop) stop ;;
url) url || die "not running (bash .ci/postgres.sh start)" ;;
*) die "usage: $0 start|stop|url" ;;
esac
