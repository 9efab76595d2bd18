#!/usr/bin/env bash
# bench/net/run.sh: network benchmarks, goro's servers against their Go 1.19
# twins over loopback. Each server runs at GOMAXPROCS=1 pinned to one CPU
# (taskset -c $SERVER_CPU), the load generator on another ($CLIENT_CPU);
# runs alternate between the servers (the order rotates every round), each
# in a fresh server process, each bounded by a timeout.
#
#   echo_N    N connections, 512-byte write + read-full round trips:
#             goro_net_echo vs `gonetbench echo-server`; client
#             `gonetbench echo-client` for both. Round trips/s, latency
#             p50/p99 of every round trip
#   http_N    wrk -t1 -cN --latency, GET /: goro_net_http vs Go net/http
#             (`gonetbench http-server`) and vs the same minimal HTTP/1.1
#             responder on Go's raw TCP (`gonetbench raw-server`)
#   mixed_N   `gonetbench http-client`, N connections, every 5th request
#             /heavy (~1 ms of the same integer hashing in both twins):
#             goro_net_http vs net/http; light and heavy latency apart
#   idle_N    `gonetbench idle-client`: N keep-alive connections, one
#             GET / each, then idle: the server's VmRSS / VmHWM (goro vs
#             net/http)
#   chat_N    broadcast chat, rooms of 20: goro_net_chat vs `gonetbench
#             chat-server` (a reader goroutine per connection, a writer
#             goroutine per client batching its channel into one write,
#             one broadcaster); client `gonetbench chat-client`: N
#             connections send CHAT_LINES (20) lines each, every line is
#             delivered to the 20 members of its room (N*20*20 deliveries,
#             each counted). Wall time from the first send to the last
#             delivery, server CPU, peak RSS, and (with perf) the server's
#             write/read/epoll_wait system calls per delivery
#   chatself_N  the same server and client in one process (goro_net_chat
#             --self vs `gonetbench chat-self`, GOMAXPROCS=1 on SERVER_CPU):
#             the runtime alone schedules both sides; system calls are the
#             process's (the client's 21 writes per connection included)
# Every throughput workload also reports the server's CPU share and its CPU
# time per request: a server below ~95% CPU was not the bottleneck (the
# client on the other CPU was), and then CPU per request is the fairer
# comparison (cli_cpu_pct: the Go client's own CPU share; near 100% it is
# the bottleneck). other_cpu_pct is the time of the server's CPU that went to
# anything but the server (other processes, interrupts): noise.
#
# usage: bench/net/run.sh [options] [workload ...]
#   -n, --runs N        runs per server and workload        (NET_RUNS, 3)
#   -d, --duration S    measured seconds per run             (NET_DURATION, 5)
#   -t, --timeout S     time limit of a client beyond its duration (NET_TIMEOUT, 30)
#       --no-build      use the binaries already built
#   workloads           default: echo_50 echo_1000 http_50 http_500 mixed_50
#                       idle_10000 chat_2000 (any N works: echo_10,
#                       http_2000, ...; chat_N, chatself_N: N a multiple
#                       of 20)
# Environment: BUILD_DIR (default <repo>/build/default), GO (go),
#   SERVER_CPU (0), CLIENT_CPU (1), JOBS (build parallelism), CHAT_LINES (20),
#   PERF (perf; empty: no system call counts).
# Output: the table on stdout; <BUILD_DIR>/bench/net/results.csv,
#   report.txt, raw.txt (one RESULT line per run and metric), logs/.
# Needs: cmake, go (1.19, standard library only), wrk, taskset, timeout;
#   perf (optional: chat's system call counts, syscalls:* tracepoints).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
RUNS=${NET_RUNS:-3}
DURATION=${NET_DURATION:-5}
TIMEOUT=${NET_TIMEOUT:-30}
GO=${GO:-go}
SERVER_CPU=${SERVER_CPU:-0}
CLIENT_CPU=${CLIENT_CPU:-1}
CHAT_LINES=${CHAT_LINES:-20}
PERF=${PERF-perf}
DO_BUILD=1
WORKLOADS=()

usage() { sed -n "2,/^set -u/p" "${BASH_SOURCE[0]}" | sed "\$d; s/^# \\{0,1\\}//"; }

while [ $# -gt 0 ]; do
  case "$1" in
    -n|--runs) RUNS=$2; shift 2 ;;
    -d|--duration) DURATION=$2; shift 2 ;;
    -t|--timeout) TIMEOUT=$2; shift 2 ;;
    --no-build) DO_BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
    *) WORKLOADS+=("$1"); shift ;;
  esac
done
case "$RUNS$DURATION$TIMEOUT" in
  *[!0-9]*) echo "runs, duration and timeout must be integers" >&2; exit 2 ;;
esac
if [ "$RUNS" -lt 1 ] || [ "$DURATION" -lt 1 ]; then
  echo "need at least one run of at least one second" >&2; exit 2
fi
[ ${#WORKLOADS[@]} -eq 0 ] &&
  WORKLOADS=(echo_50 echo_1000 http_50 http_500 mixed_50 idle_10000 chat_2000)
for w in "${WORKLOADS[@]}"; do
  case "$w" in
    echo_[1-9]*|http_[1-9]*|mixed_[1-9]*|idle_[1-9]*|chat_[1-9]*|chatself_[1-9]*)
      case "${w#*_}" in *[!0-9]*) echo "bad workload: $w" >&2; exit 2 ;; esac
      case "$w" in chat*) [ $(( ${w#*_} % 20 )) = 0 ] ||
        { echo "bad workload: $w (chat_N: N a multiple of 20)" >&2; exit 2; } ;; esac ;;
    *) echo "unknown workload: $w (echo_N, http_N, mixed_N, idle_N, chat_N, chatself_N)" >&2; exit 2 ;;
  esac
done

say() { printf '%s\n' "$*" >&2; }
for tool in wrk taskset timeout "$GO"; do
  command -v "$tool" >/dev/null 2>&1 ||
    { say "net/run.sh: $tool not found (apt-get install wrk golang-go util-linux coreutils)"; exit 2; }
done
if [ "$(nproc)" -lt 2 ]; then
  say "WARNING: $(nproc) CPU: server and client share it"
  SERVER_CPU=0 CLIENT_CPU=0
fi

OUT=$BUILD_DIR/bench/net
GORO_ECHO=$OUT/goro_net_echo
GORO_HTTP=$OUT/goro_net_http
GORO_CHAT=$OUT/goro_net_chat
GONET=$OUT/gonetbench
mkdir -p "$OUT/logs"

# --- build -------------------------------------------------------------------
if [ "$DO_BUILD" = 1 ]; then
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    if [ "$BUILD_DIR" = "$ROOT/build/default" ]; then
      say "== configuring: cmake --preset default"
      (cd "$ROOT" && cmake --preset default) >&2 || exit 1
    else
      say "== configuring: cmake -S $ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release"
      cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2 || exit 1
    fi
  fi
  say "== building goro_net_echo goro_net_http goro_net_chat in $BUILD_DIR"
  # (env -u: CMake's own makefiles must not join an outer make's jobserver)
  env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS \
    cmake --build "$BUILD_DIR" --target goro_net_echo goro_net_http goro_net_chat \
    -j "${JOBS:-$(nproc)}" >&2 || { say "error: cmake build failed"; exit 1; }
  say "== building gonetbench (bench/go/net, standard library only)"
  (cd "$ROOT/bench/go/net" &&
    GOPATH="$OUT/gopath" GOCACHE="$OUT/gocache" GOENV=off GOPROXY=off \
    GOFLAGS="" GO111MODULE=on "$GO" build -o "$GONET" .) >&2 ||
    { say "error: go build failed"; exit 1; }
fi
for b in "$GORO_ECHO" "$GORO_HTTP" "$GORO_CHAT" "$GONET"; do
  [ -x "$b" ] || { say "error: $b not built"; exit 1; }
done

# Idle connections need a descriptor each, in the server and in the client.
ulimit -n "$(ulimit -Hn)" 2>/dev/null
NOFILE=$(ulimit -n)

# --- processes ---------------------------------------------------------------
SERVER_PID=""
CLIENT_PID=""
TMP=$(mktemp -d)
cleanup() {
  [ -n "$CLIENT_PID" ] && kill "$CLIENT_PID" 2>/dev/null
  [ -n "$SERVER_PID" ] && kill -KILL "$SERVER_PID" 2>/dev/null
  wait 2>/dev/null
  rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# server_cmd <kind> <server>: the command line of a server (address last).
server_cmd() {
  case "$1:$2" in
    echo:goro) echo "$GORO_ECHO" ;;
    echo:go) echo "$GONET echo-server" ;;
    chat:goro) echo "$GORO_CHAT" ;;
    chat:go) echo "$GONET chat-server" ;;
    *:goro) echo "$GORO_HTTP" ;;
    *:go) echo "$GONET http-server" ;;
    *:raw) echo "$GONET raw-server" ;;
  esac
}

# The server's system calls that chat counts (perf stat tracepoints).
SYSCALLS=(write writev sendto sendmsg read readv recvfrom recvmsg epoll_wait epoll_pwait futex)
PERF_EVENTS=$(printf 'syscalls:sys_enter_%s,' "${SYSCALLS[@]}")
PERF_EVENTS=${PERF_EVENTS%,}
if [ -n "$PERF" ] && ! "$PERF" stat -x, -o /dev/null -e "$PERF_EVENTS" true >/dev/null 2>&1; then
  say "net/run.sh: '$PERF stat -e syscalls:*' does not work here: chat runs without system call counts"
  PERF=""
fi

# start_server <log> <cmd...>: GOMAXPROCS=1 on SERVER_CPU; sets SERVER_PID
# and ADDR from its "listening ADDR" line. With PERF_OUT set, the server
# runs under `perf stat`, which writes its counts there when it exits
# (WRAP_PID: perf's process; SERVER_PID: the server, perf's child).
start_server() {
  local log=$1
  shift
  : >"$log"
  WRAP_PID=""
  if [ -n "${PERF_OUT:-}" ]; then
    GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$PERF" stat -x, -o "$PERF_OUT" \
      -e "$PERF_EVENTS" -- "$@" 127.0.0.1:0 >"$log" 2>&1 &
    WRAP_PID=$!
    SERVER_PID=""
    for _ in $(seq 100); do
      SERVER_PID=$(pgrep -P "$WRAP_PID" | head -1)
      [ -n "$SERVER_PID" ] && break
      sleep 0.02
    done
    [ -n "$SERVER_PID" ] || SERVER_PID=$WRAP_PID
  else
    GOMAXPROCS=1 taskset -c "$SERVER_CPU" "$@" 127.0.0.1:0 >"$log" 2>&1 &
    SERVER_PID=$!
  fi
  ADDR=""
  for _ in $(seq 100); do
    ADDR=$(sed -n 's/^listening \(127\.0\.0\.1:[0-9]*\)$/\1/p' "$log" | head -1)
    [ -n "$ADDR" ] && return 0
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  say "error: server did not start: $*"
  cat "$log" >&2
  stop_server
  return 1
}

stop_server() {
  [ -n "$SERVER_PID" ] || return 0
  kill "$SERVER_PID" 2>/dev/null
  for _ in $(seq 40); do
    kill -0 "$SERVER_PID" 2>/dev/null || break
    sleep 0.05
  done
  kill -KILL "$SERVER_PID" 2>/dev/null
  wait "$SERVER_PID" 2>/dev/null
  if [ -n "${WRAP_PID:-}" ]; then
    wait "$WRAP_PID" 2>/dev/null  # perf writes its counts as it exits
    WRAP_PID=""
  fi
  SERVER_PID=""
}

# chat_syscalls <perf output> <result file>: the server's system calls per
# delivery, as RESULT lines appended to the result file.
chat_syscalls() {
  awk -F, -v res="$2" '
    BEGIN {
      while ((getline l < res) > 0) {
        split(l, f, " ")
        if (f[1] == "RESULT" && f[2] == "deliveries") d = f[3]
      }
    }
    $3 ~ /^syscalls:sys_enter_/ {
      name = $3; sub(/^syscalls:sys_enter_/, "", name); n = $1 + 0
      if (name ~ /^(write|writev|sendto|sendmsg)$/) w += n
      else if (name ~ /^(read|readv|recvfrom|recvmsg)$/) r += n
      else if (name ~ /^epoll_p?wait$/) p += n
      else if (name == "futex") x += n
      seen = 1
    }
    END {
      if (!seen || d <= 0) exit
      printf "RESULT writes %d count\nRESULT reads %d count\n", w, r
      printf "RESULT deliveries_per_write %.2f count\n", (w ? d / w : 0)
      printf "RESULT writes_per_kdeliv %.2f count\n", 1000 * w / d
      printf "RESULT reads_per_kdeliv %.2f count\n", 1000 * r / d
      printf "RESULT epoll_waits_per_kdeliv %.2f count\n", 1000 * p / d
      printf "RESULT futex_per_kdeliv %.2f count\n", 1000 * x / d
    }' "$1" >>"$2"
}

# utime + stime of a process in clock ticks.
cpu_ticks() { awk '{ sub(/.*\) /, ""); print $12 + $13 }' "/proc/$1/stat" 2>/dev/null || echo 0; }
# Busy time of one CPU (user, nice, system, irq, softirq, steal) in ticks.
cpu_busy() { awk -v c="cpu$1" '$1 == c { print $2 + $3 + $4 + $7 + $8 + $9 }' /proc/stat; }
proc_kib() { awk -v k="$2:" '$1 == k { print $2 }' "/proc/$1/status" 2>/dev/null; }

RAW=$OUT/raw.txt
: >"$RAW"
# record <workload> <server> <run> <file with "RESULT name value unit" lines>
record() {
  awk -v w="$1" -v s="$2" -v r="$3" \
    '$1 == "RESULT" && NF >= 3 { print "RESULT", w, s, r, $2, $3, ($4 == "" ? "-" : $4) }' \
    "$4" >>"$RAW"
}

# wrk's Requests/sec, latency percentiles (in us) and errors as RESULT lines.
wrk_results() {
  awk '
    function us(v) {
      if (v ~ /us$/) return v + 0
      if (v ~ /ms$/) return v * 1000
      if (v ~ /m$/) return v * 60e6
      if (v ~ /s$/) return v * 1e6
      return v
    }
    /Requests\/sec:/ { print "RESULT rate", $2, "req/s" }
    $1 == "50%" { print "RESULT p50_us", us($2), "us" }
    $1 == "90%" { print "RESULT p90_us", us($2), "us" }
    $1 == "99%" { print "RESULT p99_us", us($2), "us" }
    /Non-2xx or 3xx responses:/ { errors += $NF }
    /Socket errors:/ { gsub(/,/, ""); errors += $4 + $6 + $8 + $10 }
    END { print "RESULT errors", errors + 0, "count" }' "$1"
}

# one_run <workload> <server> <run>: appends RESULT lines to $RAW.
one_run() {
  local w=$1 srv=$2 run=$3 kind=${1%%_*} n=${1#*_} log res rc
  log=$OUT/logs/$w-$srv-run$run
  res=$TMP/res
  : >"$res"
  if [ "$kind" = chatself ]; then
    self_run "$w" "$srv" "$run" "$n"
    return
  fi
  PERF_OUT=""
  if [ "$kind" = chat ] && [ -n "$PERF" ]; then
    PERF_OUT=$log.perf
    : >"$PERF_OUT"
  fi
  # shellcheck disable=SC2046  # the command line is words
  start_server "$log.server" $(server_cmd "$kind" "$srv") || {
    echo "FAIL $w $srv $run server did not start" >>"$RAW"; return 1; }
  local limit=$((DURATION + TIMEOUT))
  local busy0 srv0 wall0
  busy0=$(cpu_busy "$SERVER_CPU")
  srv0=$(cpu_ticks "$SERVER_PID")
  wall0=$(date +%s.%N)
  case $kind in
    echo)
      taskset -c "$CLIENT_CPU" timeout -k 5 "$limit" "$GONET" echo-client \
        -pid "$SERVER_PID" -warmup 0.5 "$ADDR" "$n" "$DURATION" 512 \
        >"$res" 2>"$log.client"
      rc=$? ;;
    chat)
      taskset -c "$CLIENT_CPU" timeout -k 5 "$limit" "$GONET" chat-client \
        -pid "$SERVER_PID" "$ADDR" "$n" "$CHAT_LINES" "$limit" \
        >"$res" 2>"$log.client"
      rc=$?
      echo "RESULT hwm_kib $(proc_kib "$SERVER_PID" VmHWM) KiB" >>"$res" ;;
    mixed)
      taskset -c "$CLIENT_CPU" timeout -k 5 "$limit" "$GONET" http-client \
        -pid "$SERVER_PID" -warmup 0.5 "$ADDR" "$n" "$DURATION" 5 \
        >"$res" 2>"$log.client"
      rc=$? ;;
    http)
      # A one-second warm-up (stacks and buffers of every connection), then
      # the measured run, with the server's CPU ticks around it.
      taskset -c "$CLIENT_CPU" timeout -k 5 "$limit" \
        wrk -t1 -c"$n" -d1s "http://$ADDR/" >/dev/null 2>&1
      local c0 c1 t0 t1
      c0=$(cpu_ticks "$SERVER_PID")
      t0=$(date +%s.%N)
      taskset -c "$CLIENT_CPU" timeout -k 5 "$limit" \
        wrk -t1 -c"$n" -d"${DURATION}s" --latency "http://$ADDR/" \
        >"$log.client" 2>&1
      rc=$?
      t1=$(date +%s.%N)
      c1=$(cpu_ticks "$SERVER_PID")
      wrk_results "$log.client" >"$res"
      awk -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" '
        $2 == "rate" { rate = $3 }
        END {
          cpu = (c1 - c0) / 100; secs = t1 - t0
          printf "RESULT srv_cpu_pct %.1f %%\n", 100 * cpu / secs
          if (rate > 0) printf "RESULT srv_cpu_us_per_op %.2f us\n", cpu * 1e6 / (rate * secs)
        }' "$res" >>"$res.cpu"
      cat "$res.cpu" >>"$res"
      rm -f "$res.cpu" ;;
    idle)
      if [ "$NOFILE" -lt $((n + 64)) ]; then
        say "  $w: skipped, RLIMIT_NOFILE is $NOFILE (hard limit), need $((n + 64))"
        stop_server
        echo "FAIL $w $srv $run RLIMIT_NOFILE $NOFILE too low" >>"$RAW"
        return 1
      fi
      local rss0 rss hwm
      rss0=$(proc_kib "$SERVER_PID" VmRSS)
      # The client holds the connections until its stdin (a fifo held open
      # here) ends or the time limit passes.
      mkfifo "$TMP/hold"
      taskset -c "$CLIENT_CPU" timeout -k 5 "$limit" "$GONET" idle-client \
        "$ADDR" "$n" "$limit" <"$TMP/hold" >"$res.ready" 2>"$log.client" &
      CLIENT_PID=$!
      exec 9>"$TMP/hold"
      rc=1
      for _ in $(seq $((limit * 10))); do
        if grep -q '^ready' "$res.ready" 2>/dev/null; then rc=0; break; fi
        kill -0 "$CLIENT_PID" 2>/dev/null || break
        sleep 0.1
      done
      if [ $rc = 0 ]; then
        sleep 1  # let the last requests' garbage and buffers settle
        rss=$(proc_kib "$SERVER_PID" VmRSS)
        hwm=$(proc_kib "$SERVER_PID" VmHWM)
        {
          echo "RESULT rss_kib $rss KiB"
          echo "RESULT hwm_kib $hwm KiB"
          echo "RESULT base_rss_kib $rss0 KiB"
          echo "RESULT rss_per_conn_b $(( (rss - rss0) * 1024 / n )) B"
        } >"$res"
      fi
      exec 9>&-
      wait "$CLIENT_PID" 2>/dev/null
      CLIENT_PID=""
      rm -f "$TMP/hold" "$res.ready" ;;
  esac
  # CPU time of the server's CPU that the server did not use: other
  # processes and interrupts (noise, unless it is near 0).
  awk -v b0="$busy0" -v b1="$(cpu_busy "$SERVER_CPU")" \
    -v s0="$srv0" -v s1="$(cpu_ticks "$SERVER_PID")" \
    -v w0="$wall0" -v w1="$(date +%s.%N)" 'BEGIN {
      o = (b1 - b0) - (s1 - s0); if (o < 0) o = 0
      printf "RESULT other_cpu_pct %.1f %%\n", o / ((w1 - w0) * 100) * 100
    }' >>"$res"
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then
    rc=99
    say "  $w $srv run $run: the server died (log: $log.server)"
  fi
  stop_server
  [ -n "$PERF_OUT" ] && chat_syscalls "$PERF_OUT" "$res"
  if [ "${rc:-1}" -ne 0 ] || ! grep -q '^RESULT' "$res"; then
    echo "FAIL $w $srv $run exit status ${rc:-?} (logs: $log.*)" >>"$RAW"
    LAST="FAILED (exit status ${rc:-?}, logs: $log.*)"
    return 1
  fi
  record "$w" "$srv" "$run" "$res"
  LAST=$(awk '$1 == "RESULT" && $2 ~ /^(rate|p99_us|light_p99_us|rss_kib|srv_cpu_pct|wall_ms|deliveries_per_write)$/ {
                printf "%s%s=%s", sep, $2, $3; sep = " " }' "$res")
  return 0
}

# self_run <workload> <server> <run> <conns>: chatself_N, the chat server
# and its client in one process (GOMAXPROCS=1 on SERVER_CPU, the client's
# goroutines included), under perf when it works: its system calls are the
# client's and the server's together (the client's writes are the same in
# both twins: one per line plus one join per connection).
self_run() {
  local w=$1 srv=$2 run=$3 n=$4 log res=$TMP/res rc cmd
  log=$OUT/logs/$w-$srv-run$run
  case $srv in
    goro) cmd=("$GORO_CHAT" --self) ;;
    go) cmd=("$GONET" chat-self) ;;
  esac
  local limit=$((DURATION + TIMEOUT))
  local wrap=()
  # shellcheck disable=SC2054  # -x, is one word
  [ -n "$PERF" ] && wrap=("$PERF" stat -x, -o "$log.perf" -e "$PERF_EVENTS" --)
  : >"$log.perf"
  # Peak RSS from GNU time where it is installed.
  local peak=()
  [ -x /usr/bin/time ] && peak=(/usr/bin/time -f "RESULT hwm_kib %M KiB" -o "$res.time")
  GOMAXPROCS=1 taskset -c "$SERVER_CPU" timeout -k 5 "$limit" "${wrap[@]}" \
    "${peak[@]}" "${cmd[@]}" "$n" "$CHAT_LINES" "$limit" >"$res" 2>"$log.client"
  rc=$?
  cat "$res.time" >>"$res" 2>/dev/null
  rm -f "$res.time"
  [ -n "$PERF" ] && chat_syscalls "$log.perf" "$res"
  if [ "$rc" -ne 0 ] || ! grep -q '^RESULT wall_ms' "$res"; then
    echo "FAIL $w $srv $run exit status $rc (logs: $log.*)" >>"$RAW"
    LAST="FAILED (exit status $rc, logs: $log.*)"
    return 1
  fi
  record "$w" "$srv" "$run" "$res"
  LAST=$(awk '$1 == "RESULT" && $2 ~ /^(wall_ms|deliveries_per_write)$/ {
                printf "%s%s=%s", sep, $2, $3; sep = " " }' "$res")
  return 0
}

servers_of() {
  case $1 in
    http_*) echo "goro go raw" ;;
    *) echo "goro go" ;;
  esac
}

# --- header ------------------------------------------------------------------
cache_var() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" 2>/dev/null | head -1; }
CXX_PATH=$(cache_var CMAKE_CXX_COMPILER)
HEAVY_GORO=$(taskset -c "$CLIENT_CPU" "$GORO_HTTP" --heavy-time | awk '{ print $2 }')
HEAVY_GO=$(taskset -c "$CLIENT_CPU" "$GONET" heavy-time | awk '{ print $2 }')
HEADER=$(cat <<EOF
goro vs Go — network benchmarks over loopback, $(date -u '+%Y-%m-%d %H:%M UTC')
host:    nproc $(nproc), kernel $(uname -r), $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), load $(cut -d' ' -f1-3 /proc/loadavg)
go:      $("$GO" version)
goro:    build $(cache_var CMAKE_BUILD_TYPE) in $BUILD_DIR, $([ -n "$CXX_PATH" ] && "$CXX_PATH" --version 2>/dev/null | head -1)
setup:   servers GOMAXPROCS=1 on CPU $SERVER_CPU, clients on CPU $CLIENT_CPU; $RUNS runs x ${DURATION}s per server, alternating; RLIMIT_NOFILE $NOFILE
heavy:   one /heavy computation: goro ${HEAVY_GORO} us, Go ${HEAVY_GO} us
EOF
)
echo "$HEADER"
if awk -v n="$(nproc)" '{ exit !($1 > 0.5 * n) }' /proc/loadavg; then
  echo "WARNING: the machine is busy (load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs): numbers will be noisy"
fi
echo

# --- runs --------------------------------------------------------------------
START=$(date +%s)
for w in "${WORKLOADS[@]}"; do
  read -r -a srvs <<<"$(servers_of "$w")"
  for run in $(seq "$RUNS"); do
    # Rotate the order each round, so no server always runs first.
    k=$(( (run - 1) % ${#srvs[@]} ))
    order=("${srvs[@]:k}" "${srvs[@]:0:k}")
    for srv in "${order[@]}"; do
      LAST=""
      one_run "$w" "$srv" "$run"
      printf '  %-11s run %d/%d  %-4s %s\n' "$w" "$run" "$RUNS" "$srv" "$LAST" >&2
    done
  done
done
say "  (runs took $(( $(date +%s) - START )) s)"

# --- report ------------------------------------------------------------------
# Rows: <workload pattern> <metric> <compared with> <min|max|info> <limit>
# min: goro/other >= limit (higher is better); max: goro/other <= limit.
SPEC=$(cat <<'EOF'
echo_  rate               go   min  1.3
echo_  p99_us             go   max  1.0
echo_  p50_us             go   info -
echo_  srv_cpu_pct        go   info -
echo_  srv_cpu_us_per_op  go   info -
echo_  cli_cpu_pct        go   info -
echo_  other_cpu_pct      go   info -
http_  rate               go   min  1.5
http_  rate               raw  min  1.0
http_  p99_us             go   max  1.0
http_  p99_us             raw  info -
http_  p50_us             go   info -
http_  srv_cpu_pct        go   info -
http_  srv_cpu_us_per_op  go   info -
http_  srv_cpu_us_per_op  raw  info -
http_  errors             go   info -
http_  other_cpu_pct      go   info -
mixed_ light_p99_us       go   max  1.0
mixed_ light_p50_us       go   info -
mixed_ heavy_p99_us       go   info -
mixed_ rate               go   info -
mixed_ srv_cpu_pct        go   info -
mixed_ cli_cpu_pct        go   info -
mixed_ other_cpu_pct      go   info -
idle_  rss_kib            go   max  1.0
idle_  hwm_kib            go   info -
idle_  rss_per_conn_b     go   info -
chat_  wall_ms            go   max  1.0
chat_  writes_per_kdeliv  go   max  1.0
chat_  deliveries_per_write go info -
chat_  reads_per_kdeliv   go   info -
chat_  epoll_waits_per_kdeliv go info -
chat_  futex_per_kdeliv   go   info -
chat_  srv_cpu_ms         go   info -
chat_  srv_cpu_pct        go   info -
chat_  hwm_kib            go   info -
chat_  other_cpu_pct      go   info -
chatself_ wall_ms         go   max  1.0
chatself_ writes_per_kdeliv go max  1.0
chatself_ deliveries_per_write go info -
chatself_ reads_per_kdeliv go  info -
chatself_ epoll_waits_per_kdeliv go info -
chatself_ futex_per_kdeliv go  info -
chatself_ hwm_kib         go   info -
EOF
)
CSV=$OUT/results.csv
WL_ORDER=" ${WORKLOADS[*]} "
awk -v spec="$SPEC" -v csv="$CSV" -v order="$WL_ORDER" '
  function median(k,   n, i, j, t, a) {
    n = split(vals[k], a, " ")
    for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] + 0 > a[j] + 0; j--) {
      t = a[j]; a[j] = a[j - 1]; a[j - 1] = t
    }
    cnt = n; lo = a[1]; hi = a[n]
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  function fmt(v) {
    if (v == "") return "-"
    if (v + 0 >= 1000 || v + 0 == int(v + 0)) return sprintf("%.0f", v)
    if (v + 0 >= 10) return sprintf("%.1f", v)
    return sprintf("%.2f", v)
  }
  function cell(k,   m) {
    if (!(k in vals)) { cm = ""; cl = ""; ch = ""; cnt = 0; return "-" }
    m = median(k); cm = m; cl = lo; ch = hi
    return fmt(m) " (" fmt(lo) ".." fmt(hi) ")"
  }
  $1 == "RESULT" { k = $2 SUBSEP $3 SUBSEP $5; vals[k] = vals[k] " " $6; seen[$2] = 1 }
  $1 == "FAIL" { fails[$2] = fails[$2] " " $3 ":run" $4 }
  END {
    nspec = split(spec, lines, "\n")
    names["go"] = "Go net/http"; names["raw"] = "Go raw TCP"
    printf "%-11s %-18s %-26s %-12s %-26s %7s %-9s %s\n",
      "workload", "metric", "goro median (min..max)", "vs", "median (min..max)",
      "ratio", "target", "ok?"
    print "workload,metric,goro_median,goro_min,goro_max,vs,vs_median,vs_min,vs_max,ratio,target,status,runs" > csv
    nw = split(order, wl, " ")
    for (i = 1; i <= nw; i++) {
      w = wl[i]
      if (!(w in seen)) { printf "%-11s (no results)\n", w; continue }
      for (l = 1; l <= nspec; l++) {
        split(lines[l], f, " ")
        if (index(w, f[1]) != 1) continue
        metric = f[2]; other = f[3]; kind = f[4]; limit = f[5]
        vs = (w ~ /^(echo|chat|chatself)_/ && other == "go") ? "Go" : names[other]
        gk = w SUBSEP "goro" SUBSEP metric; ok_ = w SUBSEP other SUBSEP metric
        if (!(gk in vals) && !(ok_ in vals)) continue
        gc = cell(gk); gm = cm; gl = cl; gh = ch; runs = cnt
        oc = cell(ok_); om = cm
        ratio = (gm != "" && om != "" && om + 0 != 0) ? gm / om : ""
        target = "-"; status = ""
        if (kind == "min") target = ">= " limit
        if (kind == "max") target = "<= " limit
        if (kind != "info") {
          if (ratio == "") status = "n/a"
          else if (kind == "min") status = (ratio >= limit) ? "ok" : "MISS"
          else status = (ratio <= limit) ? "ok" : "MISS"
        }
        printf "%-11s %-18s %-26s %-12s %-26s %7s %-9s %s\n", w, metric, gc, vs, oc,
          (ratio == "" ? "-" : sprintf("%.2f", ratio)), target, status
        printf "%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s\n", w, metric, gm, gl, gh, vs, om, cl, ch,
          (ratio == "" ? "" : sprintf("%.4f", ratio)), target, status, runs > csv
      }
      if (w in fails) printf "%-11s FAILED runs:%s\n", w, fails[w]
    }
  }' "$RAW" >"$TMP/table"
{ echo "$HEADER"; echo; cat "$TMP/table"; } >"$OUT/report.txt"
cat "$TMP/table"
echo
echo "ratio: goro median / the other server's median; for latencies and memory lower is better."
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "CSV: $CSV   report: $OUT/report.txt   raw: $RAW"
