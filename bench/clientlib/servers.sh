# shellcheck shell=bash
# shellcheck disable=SC2034  # SERVERS_WHY, PG_* and REDIS_SOCK are for the caller
# bench/clientlib/servers.sh: throw-away PostgreSQL and Redis servers for
# the client-library benchmarks (bench/clientlib/run.sh) and the example
# examples/pg_redis_service.cpp's test. Source it (bash), then:
#
#   servers_start DIR [pg] [redis]   start them under DIR (a fresh, empty
#                                    directory, which user postgres must
#                                    be able to reach when run as root);
#                                    returns non-zero with the
#                                    reason in SERVERS_WHY when one cannot
#                                    start (missing binary, initdb failed...)
#   servers_stop                     stop whatever servers_start started
#                                    (idempotent: call it from a trap)
#
# After servers_start:
#   PG_SOCKDIR PG_PORT    the cluster's Unix socket directory and its
#                         127.0.0.1 TCP port; user postgres, database
#                         postgres, trust authentication
#   PG_CONNINFO           libpq key=value string over TCP 127.0.0.1
#   PG_CONNINFO_UNIX      the same over the Unix socket
#   REDIS_SOCK            redis-server's Unix socket (no TCP port)
#
# PostgreSQL 15: fsync off, max_connections $PG_MAX_CONNECTIONS (1100),
# 32 MB shared buffers, logs in DIR/pg/pg.log. initdb and postgres refuse to
# run as root: as root they run as the system user postgres (runuser).
# Redis: no persistence (--save ''), maxclients $REDIS_MAXCLIENTS (2000).
# Every step is bounded in time (SERVERS_TIMEOUT seconds, default 60).
# Environment: PG_BINDIR (default: the newest /usr/lib/postgresql/*/bin),
#   REDIS_SERVER (default: redis-server on PATH), SERVERS_CPUS (a taskset
#   CPU list: the servers and every backend they fork run on those CPUs
#   only; default: anywhere).

PG_MAX_CONNECTIONS=${PG_MAX_CONNECTIONS:-1100}
REDIS_MAXCLIENTS=${REDIS_MAXCLIENTS:-2000}
SERVERS_TIMEOUT=${SERVERS_TIMEOUT:-60}
SERVERS_DIR=""
SERVERS_WHY=""
_SRV_PG_UP=0
_SRV_REDIS_PID=""
_SRV_AS_PG=()
_SRV_PIN=()

_srv_find_pg() {
  if [ -n "${PG_BINDIR:-}" ]; then
    [ -x "$PG_BINDIR/postgres" ] && return 0
    SERVERS_WHY="PG_BINDIR=$PG_BINDIR has no postgres binary"
    return 1
  fi
  local d
  for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -t/ -k4 -n -r); do
    if [ -x "$d/postgres" ] && [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ]; then
      PG_BINDIR=$d
      return 0
    fi
  done
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then
    PG_BINDIR=$(dirname "$(command -v pg_ctl)")
    return 0
  fi
  SERVERS_WHY="PostgreSQL server binaries not found (apt-get install postgresql)"
  return 1
}

# A TCP port on 127.0.0.1 that nothing listens on now (PostgreSQL has no
# port 0; a race with another process is caught by the start failing, and
# the caller retries with another port).
_srv_free_port() {
  local p
  for _ in $(seq 50); do
    p=$((20000 + RANDOM % 40000))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

_srv_start_pg() {
  _srv_find_pg || return 1
  local dir=$SERVERS_DIR/pg
  mkdir -p "$dir/sock"
  _SRV_AS_PG=()
  if [ "$(id -u)" = 0 ]; then
    if ! id postgres >/dev/null 2>&1; then
      SERVERS_WHY="running as root and there is no postgres user for initdb"
      return 1
    fi
    command -v runuser >/dev/null 2>&1 ||
      { SERVERS_WHY="running as root without runuser"; return 1; }
    chown -R postgres: "$dir"
    chmod 755 "$SERVERS_DIR"
    _SRV_AS_PG=(runuser -u postgres --)
    if ! "${_SRV_AS_PG[@]}" test -w "$dir/sock"; then
      SERVERS_WHY="user postgres cannot reach $dir (a parent directory not searchable by others?)"
      return 1
    fi
  fi
  if ! timeout "$SERVERS_TIMEOUT" "${_SRV_AS_PG[@]}" "$PG_BINDIR/initdb" \
       -D "$dir/data" -U postgres -A trust -E UTF8 --locale=C --no-sync \
       >"$SERVERS_DIR/initdb.log" 2>&1; then
    SERVERS_WHY="initdb failed (log: $SERVERS_DIR/initdb.log)"
    return 1
  fi
  local port
  for _ in 1 2 3; do
    port=$(_srv_free_port) || { SERVERS_WHY="no free TCP port"; return 1; }
    if timeout "$SERVERS_TIMEOUT" "${_SRV_PIN[@]}" "${_SRV_AS_PG[@]}" "$PG_BINDIR/pg_ctl" \
         -D "$dir/data" -l "$dir/pg.log" -w -t "$SERVERS_TIMEOUT" \
         -o "-p $port -k $dir/sock -c listen_addresses=127.0.0.1 \
-c max_connections=$PG_MAX_CONNECTIONS -c fsync=off -c synchronous_commit=off \
-c full_page_writes=off -c shared_buffers=32MB -c max_wal_senders=0 \
-c wal_level=minimal -c autovacuum=off -c log_min_messages=warning" \
         start >"$SERVERS_DIR/pg_ctl.log" 2>&1; then
      _SRV_PG_UP=1
      PG_SOCKDIR=$dir/sock
      PG_PORT=$port
      PG_CONNINFO="host=127.0.0.1 port=$port user=postgres dbname=postgres sslmode=disable"
      PG_CONNINFO_UNIX="host=$PG_SOCKDIR port=$port user=postgres dbname=postgres"
      export PG_SOCKDIR PG_PORT PG_CONNINFO PG_CONNINFO_UNIX
      return 0
    fi
    # pg_ctl may time out with the server half up: stop it before a retry.
    timeout 20 "${_SRV_AS_PG[@]}" "$PG_BINDIR/pg_ctl" -D "$dir/data" \
      -m immediate -w stop >/dev/null 2>&1
  done
  SERVERS_WHY="postgres did not start (logs: $dir/pg.log, $SERVERS_DIR/pg_ctl.log)"
  return 1
}

_srv_start_redis() {
  local rs=${REDIS_SERVER:-redis-server}
  command -v "$rs" >/dev/null 2>&1 ||
    { SERVERS_WHY="redis-server not found (apt-get install redis-server)"; return 1; }
  REDIS_SOCK=$SERVERS_DIR/redis.sock
  "${_SRV_PIN[@]}" "$rs" --port 0 --unixsocket "$REDIS_SOCK" --unixsocketperm 700 \
    --save '' --appendonly no --maxclients "$REDIS_MAXCLIENTS" \
    --daemonize no --logfile "$SERVERS_DIR/redis.log" \
    --dir "$SERVERS_DIR" >/dev/null 2>&1 &
  _SRV_REDIS_PID=$!
  for _ in $(seq $((SERVERS_TIMEOUT * 20))); do
    if [ -S "$REDIS_SOCK" ]; then
      # The socket exists once redis listens; ping when redis-cli is here.
      if ! command -v redis-cli >/dev/null 2>&1 ||
         [ "$(timeout 5 redis-cli -s "$REDIS_SOCK" ping 2>/dev/null)" = PONG ]; then
        export REDIS_SOCK
        return 0
      fi
    fi
    kill -0 "$_SRV_REDIS_PID" 2>/dev/null || break
    sleep 0.05
  done
  SERVERS_WHY="redis-server did not start (log: $SERVERS_DIR/redis.log)"
  return 1
}

servers_start() {
  SERVERS_DIR=$1
  shift
  local want=("$@")
  [ ${#want[@]} -eq 0 ] && want=(pg redis)
  _SRV_PIN=()
  if [ -n "${SERVERS_CPUS:-}" ]; then
    command -v taskset >/dev/null 2>&1 ||
      { SERVERS_WHY="SERVERS_CPUS set but taskset not found"; return 1; }
    _SRV_PIN=(taskset -c "$SERVERS_CPUS")
  fi
  command -v timeout >/dev/null 2>&1 ||
    { SERVERS_WHY="timeout (coreutils) not found"; return 1; }
  mkdir -p "$SERVERS_DIR" || { SERVERS_WHY="cannot create $SERVERS_DIR"; return 1; }
  local s
  for s in "${want[@]}"; do
    case $s in
      pg) _srv_start_pg || return 1 ;;
      redis) _srv_start_redis || return 1 ;;
      *) SERVERS_WHY="unknown server $s"; return 1 ;;
    esac
  done
  return 0
}

servers_stop() {
  if [ "$_SRV_PG_UP" = 1 ]; then
    timeout 30 "${_SRV_AS_PG[@]}" "$PG_BINDIR/pg_ctl" -D "$SERVERS_DIR/pg/data" \
      -m immediate -w -t 20 stop >/dev/null 2>&1
    _SRV_PG_UP=0
  fi
  if [ -n "$_SRV_REDIS_PID" ]; then
    kill "$_SRV_REDIS_PID" 2>/dev/null
    for _ in $(seq 40); do
      kill -0 "$_SRV_REDIS_PID" 2>/dev/null || break
      sleep 0.05
    done
    kill -KILL "$_SRV_REDIS_PID" 2>/dev/null
    wait "$_SRV_REDIS_PID" 2>/dev/null
    _SRV_REDIS_PID=""
  fi
}
