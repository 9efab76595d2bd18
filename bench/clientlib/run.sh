#!/usr/bin/env bash
# bench/clientlib/run.sh: blocking C client libraries in goroutines (issue
# 24). Starts a throw-away PostgreSQL 15 cluster and a redis-server
# (bench/clientlib/servers.sh; stopped on exit, whatever happens), then runs
# each workload with three clients, one fresh process per run, the order
# rotating every round:
#   goro     goro_clientlib_bench --mode goro: a goroutine per connection,
#            libpq/hiredis's blocking calls parked on goro's poller by the
#            interposed libc socket functions (GOMAXPROCS = the CPUs)
#   go       its Go 1.19 twin bench/go/clientlib (database/sql + lib/pq,
#            redigo): a goroutine per connection
#   threads  goro_clientlib_bench --mode threads: one std::thread per
#            connection, the same C libraries (the usual C++ answer)
#
#   pg_N     N connections, `SELECT $1::int` back to back on each (libpq
#            PQexecParams / lib/pq with binary_parameters: one round trip)
#   redis_N  N connections, SET and GET of the connection's own key
#            alternately (hiredis redisCommand / redigo Do)
#   interpose  goro_interpose_cost: ns per interposed read/write/send/recv/
#            poll that need not wait, against the raw system call, on a
#            plain thread and in a goroutine (goro only)
# Reported per workload: rate (ops/s completed by the deadline), p99_us and p50_us (every operation's
# latency), hwm_kib (peak RSS), threads_max (most OS threads at once),
# cpu_us_per_op (the client process's CPU time per operation),
# minflt (page faults), drain_ms (deadline to the last operation's end),
# connect_ms (opening all N connections and one warm-up operation), max_us
# (the slowest operation), conn_ops_min and conn_ops_mean (operations per
# connection in the window: the fewest and the mean, fairness), starved
# (connections that completed no operation: unfairness): goro's
# median (min..max), Go's and threads', and goro/Go, goro/threads ratios of
# the medians. Servers and clients share the machine's CPUs: on a small
# machine the servers are the bottleneck and the rates mostly measure them.
#
# usage: bench/clientlib/run.sh [options] [workload ...]
#   -n, --runs N        runs per client and workload       (CLIENT_RUNS, 3)
#   -d, --duration S    measured seconds per run            (CLIENT_DURATION, 3)
#   -t, --timeout S     time limit of a run beyond its duration (CLIENT_TIMEOUT, 60)
#       --clients "goro go threads"  which clients to run
#       --pin S:C       servers (and their backends) on CPU list S, clients
#                       on CPU list C (taskset), e.g. --pin 0:1: a client
#                       with few threads then does not compete with a
#                       thousand server processes for the same CPUs
#                       (CLIENT_PIN; default: no pinning)
#       --no-build      use the binaries already built
#   workloads           default: pg_100 pg_1000 redis_100 redis_1000 interpose
# Environment: BUILD_DIR (default <repo>/build/default), GO (go), JOBS,
#   PG_BINDIR, REDIS_SERVER (see servers.sh), GOPATH_DEB (Debian's Go
#   sources, default /usr/share/gocode).
# Output: the table on stdout; <BUILD_DIR>/bench/clientlib/report.txt,
#   results.csv, raw.txt, logs/.
# Needs: cmake, pkg-config with libpq and hiredis, go 1.19 with Debian's
#   golang-github-lib-pq-dev and golang-github-gomodule-redigo-dev,
#   PostgreSQL server binaries, redis-server, timeout.
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
RUNS=${CLIENT_RUNS:-3}
DURATION=${CLIENT_DURATION:-3}
TIMEOUT=${CLIENT_TIMEOUT:-60}
CLIENTS="goro go threads"
GO=${GO:-go}
GOPATH_DEB=${GOPATH_DEB:-/usr/share/gocode}
DO_BUILD=1
PIN=${CLIENT_PIN:-}
WORKLOADS=()

usage() { sed -n "2,/^set -u/p" "${BASH_SOURCE[0]}" | sed "\$d; s/^# \\{0,1\\}//"; }

while [ $# -gt 0 ]; do
  case "$1" in
    -n|--runs) RUNS=$2; shift 2 ;;
    -d|--duration) DURATION=$2; shift 2 ;;
    -t|--timeout) TIMEOUT=$2; shift 2 ;;
    --clients) CLIENTS=$2; shift 2 ;;
    --pin) PIN=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
    *) WORKLOADS+=("$1"); shift ;;
  esac
done
case "$RUNS$TIMEOUT" in
  *[!0-9]*) echo "runs and timeout must be integers" >&2; exit 2 ;;
esac
case "$DURATION" in
  ''|*[!0-9.]*) echo "duration must be a number of seconds" >&2; exit 2 ;;
esac
[ "$RUNS" -ge 1 ] || { echo "need at least one run" >&2; exit 2; }
[ ${#WORKLOADS[@]} -eq 0 ] && WORKLOADS=(pg_100 pg_1000 redis_100 redis_1000 interpose)
for w in "${WORKLOADS[@]}"; do
  case "$w" in
    interpose) ;;
    pg_[1-9]*|redis_[1-9]*)
      case "${w#*_}" in *[!0-9]*) echo "bad workload: $w" >&2; exit 2 ;; esac ;;
    *) echo "unknown workload: $w (pg_N, redis_N, interpose)" >&2; exit 2 ;;
  esac
done
for c in $CLIENTS; do
  case $c in goro|go|threads) ;; *) echo "unknown client: $c" >&2; exit 2 ;; esac
done

CLIENT_WRAP=()
if [ -n "$PIN" ]; then
  case "$PIN" in
    *:*) ;;
    *) echo "--pin wants SERVER_CPUS:CLIENT_CPUS, e.g. 0:1" >&2; exit 2 ;;
  esac
  command -v taskset >/dev/null 2>&1 || { echo "--pin needs taskset" >&2; exit 2; }
  export SERVERS_CPUS=${PIN%%:*}
  CLIENT_WRAP=(taskset -c "${PIN#*:}")
fi

say() { printf '%s\n' "$*" >&2; }
OUT=$BUILD_DIR/bench/clientlib
CPP_BIN=$OUT/goro_clientlib_bench
COST_BIN=$OUT/goro_interpose_cost
GO_BIN=$OUT/goclientbench
mkdir -p "$OUT/logs"

# --- build -------------------------------------------------------------------
if [ "$DO_BUILD" = 1 ]; then
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    say "== configuring: cmake -S $ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release"
    cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2 || exit 1
  fi
  say "== building goro_clientlib_bench goro_interpose_cost in $BUILD_DIR"
  # (env -u: CMake's own makefiles must not join an outer make's jobserver)
  env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS \
    cmake --build "$BUILD_DIR" --target goro_clientlib_bench goro_interpose_cost \
    -j "${JOBS:-$(nproc)}" >&2 ||
    { say "error: cmake build failed (libpq-dev and libhiredis-dev installed? see bench/clientlib/CMakeLists.txt)"; exit 1; }
  if [[ " $CLIENTS " == *" go "* ]]; then
    say "== building goclientbench (bench/go/clientlib, GOPATH mode: $GOPATH_DEB)"
    (cd "$ROOT/bench/go/clientlib" &&
      GO111MODULE=off GOPATH="$GOPATH_DEB:$OUT/gopath" GOCACHE="$OUT/gocache" \
      GOENV=off GOPROXY=off GOFLAGS="" "$GO" build -o "$GO_BIN" .) >&2 ||
      { say "error: go build failed (apt-get install golang-github-lib-pq-dev golang-github-gomodule-redigo-dev)"; exit 1; }
  fi
fi
for b in "$CPP_BIN" "$COST_BIN"; do
  [ -x "$b" ] || { say "error: $b not built"; exit 1; }
done
if [[ " $CLIENTS " == *" go "* ]] && [ ! -x "$GO_BIN" ]; then
  say "error: $GO_BIN not built"; exit 1
fi

# A thousand connections need a descriptor each (redis's maxclients too).
ulimit -n "$(ulimit -Hn)" 2>/dev/null

# --- servers -----------------------------------------------------------------
# shellcheck source=bench/clientlib/servers.sh
source "$ROOT/bench/clientlib/servers.sh"
TMP=$(mktemp -d)
chmod 755 "$TMP"  # as root, the cluster runs as user postgres under it
RUN_PID=""
cleanup() {
  [ -n "$RUN_PID" ] && kill -KILL "$RUN_PID" 2>/dev/null
  servers_stop
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need_pg=0 need_redis=0
for w in "${WORKLOADS[@]}"; do
  case $w in pg_*) need_pg=1 ;; redis_*) need_redis=1 ;; esac
done
want=()
[ $need_pg = 1 ] && want+=(pg)
[ $need_redis = 1 ] && want+=(redis)
if [ ${#want[@]} -gt 0 ]; then
  say "== starting ${want[*]} in $TMP/servers"
  if ! servers_start "$TMP/servers" "${want[@]}"; then
    say "error: $SERVERS_WHY"
    exit 1
  fi
fi

# --- runs --------------------------------------------------------------------
RAW=$OUT/raw.txt
: >"$RAW"

# one_run <workload> <client> <run>: RESULT lines into $RAW.
one_run() {
  local w=$1 c=$2 run=$3 kind=${1%%_*} n=${1#*_} log res rc cmd
  log=$OUT/logs/$w-$c-run$run
  res=$TMP/res
  case $c in
    goro) cmd=("$CPP_BIN" "$kind" --mode goro) ;;
    threads) cmd=("$CPP_BIN" "$kind" --mode threads) ;;
    go) cmd=("$GO_BIN" "$kind") ;;
  esac
  if [ "$c" = go ]; then
    cmd+=(-conns "$n" -duration "$DURATION")
  else
    cmd+=(--conns "$n" --duration "$DURATION")
  fi
  timeout -k 5 "$(awk -v d="$DURATION" -v t="$TIMEOUT" 'BEGIN { print int(d + t) }')" \
    "${CLIENT_WRAP[@]}" "${cmd[@]}" >"$res" 2>"$log.stderr" &
  RUN_PID=$!
  wait "$RUN_PID"
  rc=$?
  RUN_PID=""
  if [ "$rc" -ne 0 ] || ! grep -q '^RESULT rate' "$res"; then
    echo "FAIL $w $c $run exit status $rc (log: $log.stderr)" >>"$RAW"
    cp "$res" "$log.stdout"
    LAST="FAILED (exit status $rc, log: $log.stderr)"
    return 1
  fi
  awk -v w="$w" -v c="$c" -v r="$run" \
    '$1 == "RESULT" { print "RESULT", w, c, r, $2, $3, $4 }' "$res" >>"$RAW"
  LAST=$(awk '$1 == "RESULT" && $2 ~ /^(rate|p99_us|hwm_kib|threads_max)$/ {
                printf "%s%s=%s", sep, $2, $3; sep = " " }' "$res")
  # A healthy run prints nothing on stderr: say so when it did.
  [ -s "$log.stderr" ] && LAST="$LAST  (stderr: $log.stderr)"
  return 0
}

HEADER=$(cat <<EOF
goro vs Go vs thread-per-connection — blocking client libraries, $(date -u '+%Y-%m-%d %H:%M UTC')
host:    nproc $(nproc), kernel $(uname -r), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)
go:      $("$GO" version 2>/dev/null)
goro:    $(git -C "$ROOT" log -1 --format='%h %s' 2>/dev/null | cut -c1-70); GORO_DEBUG=${GORO_DEBUG:-}
libs:    libpq $(pkg-config --modversion libpq 2>/dev/null), hiredis $(pkg-config --modversion hiredis 2>/dev/null); servers: $("${PG_BINDIR:-/usr/lib/postgresql/15/bin}/postgres" --version 2>/dev/null), $(redis-server --version 2>/dev/null | awk '{ print $3 }')
setup:   $([ -n "$PIN" ] && echo "servers on CPUs ${PIN%%:*}, clients on CPUs ${PIN#*:} (taskset); GOMAXPROCS = the client's CPUs" || echo "clients and servers on the same CPUs; GOMAXPROCS = $(nproc) for goro and Go"); $RUNS runs x ${DURATION}s per client, order rotating
EOF
)
echo "$HEADER"
if awk -v n="$(nproc)" '{ exit !($1 > 0.5 * n) }' /proc/loadavg; then
  echo "WARNING: the machine is busy (load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs): numbers will be noisy"
fi
echo

START=$(date +%s)
read -r -a clients <<<"$CLIENTS"
for w in "${WORKLOADS[@]}"; do
  if [ "$w" = interpose ]; then
    for run in $(seq "$RUNS"); do
      if timeout -k 5 "$TIMEOUT" "${CLIENT_WRAP[@]}" "$COST_BIN" --ms 50 --reps 6 >"$TMP/res" \
           2>"$OUT/logs/interpose-run$run.stderr"; then
        awk -v r="$run" '$1 == "RESULT" { print "RESULT interpose goro", r, $2, $3, $4 }' \
          "$TMP/res" >>"$RAW"
        say "  interpose   run $run/$RUNS  ok"
      else
        echo "FAIL interpose goro $run" >>"$RAW"
        say "  interpose   run $run/$RUNS  FAILED"
      fi
    done
    continue
  fi
  for run in $(seq "$RUNS"); do
    k=$(( (run - 1) % ${#clients[@]} ))
    order=("${clients[@]:k}" "${clients[@]:0:k}")
    for c in "${order[@]}"; do
      LAST=""
      one_run "$w" "$c" "$run"
      printf '  %-11s run %d/%d  %-7s %s\n' "$w" "$run" "$RUNS" "$c" "$LAST" >&2
    done
  done
done
say "  (runs took $(( $(date +%s) - START )) s)"

# --- report ------------------------------------------------------------------
# Rows: <metric> <min|max|info> <limit vs Go>: min: goro/Go >= limit (higher
# is better); max: goro/Go <= limit.
SPEC="rate min 1.0
p99_us info -
p50_us info -
hwm_kib max 1.0
threads_max info -
cpu_us_per_op info -
minflt info -
drain_ms info -
connect_ms info -
max_us info -
conn_ops_min info -
conn_ops_mean info -
starved info -
errors info -"
CSV=$OUT/results.csv
awk -v spec="$SPEC" -v csv="$CSV" -v order=" ${WORKLOADS[*]} " '
  function median(k,   n, i, j, t, a) {
    n = split(vals[k], a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
      t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
    }
    lo = a[1]; hi = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function fmt(v) {
    if (v == "") return "-"
    if (v + 0 >= 1000 || v + 0 == int(v + 0)) return sprintf("%.0f", v)
    if (v + 0 >= 10) return sprintf("%.1f", v)
    return sprintf("%.2f", v)
  }
  function cell(k) {
    if (!(k in vals)) { cm = ""; cl = ""; ch = ""; return "-" }
    cm = median(k); cl = lo; ch = hi
    return fmt(cm) " (" fmt(lo) ".." fmt(hi) ")"
  }
  function ratio(a, b) { return (a != "" && b != "" && b + 0 != 0) ? sprintf("%.2f", a / b) : "-" }
  $1 == "RESULT" { k = $2 SUBSEP $3 SUBSEP $5; vals[k] = vals[k] " " $6; seen[$2] = 1
                   if ($2 == "interpose") { if (!($5 in iseen)) { iorder[++ni] = $5; iseen[$5] = 1 } } }
  $1 == "FAIL" { fails[$2] = fails[$2] " " $3 ":run" $4 }
  END {
    nspec = split(spec, lines, "\n")
    printf "%-10s %-11s %-24s %-24s %-24s %6s %6s %-6s\n", "workload", "metric",
      "goro med (min..max)", "Go med (min..max)", "threads med (min..max)",
      "g/Go", "g/thr", "target"
    print "workload,metric,goro_median,goro_min,goro_max,go_median,go_min,go_max,threads_median,threads_min,threads_max,goro_vs_go,goro_vs_threads,target,status" > csv
    nw = split(order, wl, " ")
    for (i = 1; i <= nw; i++) {
      w = wl[i]
      if (w == "interpose") continue
      if (!(w in seen)) { printf "%-10s (no results)\n", w; continue }
      for (l = 1; l <= nspec; l++) {
        split(lines[l], f, " ")
        m = f[1]
        gc = cell(w SUBSEP "goro" SUBSEP m); gm = cm; gl = cl; gh = ch
        oc = cell(w SUBSEP "go" SUBSEP m); om = cm; ol = cl; oh = ch
        tc = cell(w SUBSEP "threads" SUBSEP m); tm = cm; tl = cl; th = ch
        if (gc == "-" && oc == "-" && tc == "-") continue
        rg = ratio(gm, om); rt = ratio(gm, tm)
        target = "-"; status = ""
        if (f[2] == "min") { target = ">=" f[3]; if (rg != "-") status = (rg + 0 >= f[3]) ? "ok" : "MISS" }
        if (f[2] == "max") { target = "<=" f[3]; if (rg != "-") status = (rg + 0 <= f[3]) ? "ok" : "MISS" }
        printf "%-10s %-11s %-24s %-24s %-24s %6s %6s %-6s %s\n", w, m, gc, oc, tc, rg, rt, target, status
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", w, m, gm, gl, gh, om, ol, oh,
          tm, tl, th, rg, rt, target, status > csv
      }
      if (w in fails) printf "%-10s FAILED runs:%s\n", w, fails[w]
    }
    if (ni > 0) {
      # Metric names: <context>_<call>_{libc_ns,raw_ns,ratio}.
      print ""
      printf "%-10s %-16s %-24s %-24s %-20s\n", "interpose", "call",
        "libc ns/call (min..max)", "raw syscall ns (min..max)", "ratio (min..max)"
      for (i = 1; i <= ni; i++) {
        m = iorder[i]
        if (m !~ /_ratio$/) continue
        base = substr(m, 1, length(m) - 6)
        ctx = substr(base, 1, index(base, "_") - 1); call = substr(base, index(base, "_") + 1)
        lc = cell("interpose" SUBSEP "goro" SUBSEP base "_libc_ns"); lm = cm
        rc = cell("interpose" SUBSEP "goro" SUBSEP base "_raw_ns"); rm = cm
        qc = cell("interpose" SUBSEP "goro" SUBSEP m); qm = cm; ql = cl; qh = ch
        printf "%-10s %-16s %-24s %-24s %-20s\n", ctx, call, lc, rc, qc
        printf "interpose,%s,%s,%s,%s,,,,,,,,,,\n", base, lm, rm, qm > csv
      }
      if ("interpose" in fails) printf "interpose FAILED runs:%s\n", fails["interpose"]
    }
  }' "$RAW" >"$TMP/table"
{ echo "$HEADER"; echo; cat "$TMP/table"; } >"$OUT/report.txt"
cat "$TMP/table"
echo
echo "g/Go, g/thr: goro median / Go's, / thread-per-connection's; for latencies, memory and threads lower is better."
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CSV: $CSV   report: $OUT/report.txt   raw: $RAW"
grep -q '^FAIL' "$RAW" && exit 1
exit 0
