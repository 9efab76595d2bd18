#!/usr/bin/env bash
# bench/net_run.sh: network benchmarks, goro against Go 1.19, side by side.
#
# The server runs at GOMAXPROCS=1 pinned to CPU 0 (taskset -c 0), the load
# generator on CPU 1; goro and Go alternate, each run in fresh processes.
#
#   echo_50, echo_1000   512-byte echo ping-pong over 50 / 1000 connections for
#                        SECONDS: round trips/s and p99 latency. Server: goro
#                        bench/net_echo.cpp vs `goronet echo-server`; client:
#                        `goronet echo-client` for both (the same client).
#   http_50, http_500    wrk -t1 -cN --latency against examples/webserver ("/")
#                        vs Go net/http and a minimal Go raw-TCP responder
#   mixed_50             `goronet http-client`, 50 connections, 20% /heavy (the
#                        seed's computeHeavyTask): light and heavy p99
#   idle_10000           10,000 keep-alive connections (one request each, then
#                        idle): the server's RSS (VmRSS) while they are open
#
# Echo and HTTP also report the server's CPU time per round trip / request
# (utime + stime from /proc/PID/stat over the run): on 2 vCPUs the client
# saturates its CPU as soon as the server does, so throughput alone cannot
# show a server that needs less CPU per operation.
#
# usage: bench/net_run.sh [-n RUNS] [-d SECONDS] [workload ...]
#   BUILD_DIR (default build/default) holds webserver and net_echo; the Go
#   binary goes to $BUILD_DIR/bench/gonet. Needs go, wrk, taskset.
# Output: a table (median, min..max per runtime, goro/Go ratio, target) and
# $BUILD_DIR/bench/net_results.csv.
set -u

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
RUNS=3
SECS=3
while [[ $# -gt 0 ]]; do
  case $1 in
    -n) RUNS=$2; shift 2 ;;
    -d) SECS=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -u/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
WORKLOADS=("$@")
[[ ${#WORKLOADS[@]} -eq 0 ]] && WORKLOADS=(echo_50 echo_1000 http_50 http_500 mixed_50 idle_10000)

for tool in go wrk taskset; do
  command -v $tool >/dev/null || { echo "net_run.sh: $tool is required (apt-get install golang-go wrk util-linux)" >&2; exit 2; }
done

OUT=$BUILD_DIR/bench
mkdir -p "$OUT"
echo "== building: webserver net_echo (cmake), goronet (go build)"
cmake --build "$BUILD_DIR" -j2 --target webserver net_echo >/dev/null || { echo "build failed" >&2; exit 1; }
GONET=$OUT/gonet
(cd "$ROOT/bench/gonet" && GOPATH="$OUT/gopath" GOCACHE="$OUT/gocache" GOENV=off GOPROXY=off \
  GOFLAGS="" GO111MODULE=on go build -o "$GONET" .) || { echo "go build failed" >&2; exit 1; }
WEBSERVER=$BUILD_DIR/examples/webserver
NET_ECHO=$BUILD_DIR/bench/net_echo
ulimit -n "$(ulimit -Hn)" 2>/dev/null

SERVER_PID=
cleanup() { [[ -n $SERVER_PID ]] && kill "$SERVER_PID" 2>/dev/null; wait 2>/dev/null; }
trap cleanup EXIT INT TERM

# start_server LOG CMD...: pinned to CPU 0 at GOMAXPROCS=1; sets SERVER_PID
# and ADDR (from the "listening ADDR" / "Server started on ADDR" line).
start_server() {
  local log=$1; shift
  GOMAXPROCS=1 taskset -c 0 "$@" >"$log" 2>&1 &
  SERVER_PID=$!
  ADDR=
  for _ in $(seq 100); do
    ADDR=$(grep -oE '(listening|Server started on) [0-9.:]+' "$log" | awk '{print $NF}' | head -1)
    [[ -n $ADDR ]] && return 0
    sleep 0.05
  done
  echo "server did not start: $*" >&2; cat "$log" >&2; return 1
}
stop_server() { kill "$SERVER_PID" 2>/dev/null; wait "$SERVER_PID" 2>/dev/null; SERVER_PID=; }
# The server's CPU time so far (utime + stime), in clock ticks.
server_ticks() { awk '{print $14 + $15}' /proc/"$SERVER_PID"/stat; }
# add_cpu METRIC RUNTIME TICKS0 TICKS1 OPS: server CPU microseconds per operation.
add_cpu() {
  local v
  v=$(awk -v t0="$3" -v t1="$4" -v ops="$5" -v hz="$(getconf CLK_TCK)" \
    'BEGIN {if (ops > 0) printf "%.2f", (t1 - t0) * 1e6 / hz / ops}')
  add "$1" "$2" "$v"
}

# wrk's "Requests/sec" and its 99% latency in us.
wrk_run() {
  local conns=$1 url=$2 out
  out=$(taskset -c 1 timeout $((SECS + 30)) wrk -t1 -c"$conns" -d"${SECS}s" --latency "$url" 2>&1)
  local rate p99
  rate=$(awk '/Requests\/sec/ {print $2}' <<<"$out")
  p99=$(awk '$1 == "99%" {v=$2; if (v ~ /us$/) {sub(/us/,"",v); print v} else if (v ~ /ms$/) {sub(/ms/,"",v); print v*1000} else if (v ~ /s$/) {sub(/s/,"",v); print v*1000000}}' <<<"$out")
  echo "rate=$rate p99_us=$p99"
}

declare -A RES  # RES[metric|runtime] = space-separated samples
add() { RES["$1|$2"]="${RES["$1|$2"]:-} $3"; }

# one_run WORKLOAD RUNTIME(goro|go|goraw)
one_run() {
  local w=$1 rt=$2 log=$OUT/net_server_${w}_${rt}.log
  case $w in
    echo_*)
      local n=${w#echo_}
      if [[ $rt == goro ]]; then start_server "$log" "$NET_ECHO" 127.0.0.1:0 || return
      else start_server "$log" "$GONET" echo-server 127.0.0.1:0 || return; fi
      local out t0 t1
      t0=$(server_ticks)
      out=$(taskset -c 1 timeout $((SECS + 60)) "$GONET" echo-client "$ADDR" "$n" "$SECS")
      t1=$(server_ticks)
      local rate
      rate=$(awk '/RESULT echo_rate/ {print $3}' <<<"$out")
      add "${w}_rt_per_s" "$rt" "$rate"
      add_cpu "${w}_server_cpu_us_per_rt" "$rt" "$t0" "$t1" "$(awk -v r="$rate" -v s="$SECS" 'BEGIN {print r * s}')"
      add "${w}_p99_us" "$rt" "$(awk '/RESULT echo_p99_us/ {print $3}' <<<"$out")"
      stop_server ;;
    http_*)
      local n=${w#http_}
      case $rt in
        goro) start_server "$log" "$WEBSERVER" 127.0.0.1:0 || return ;;
        go) start_server "$log" "$GONET" http-server 127.0.0.1:0 || return ;;
        goraw) start_server "$log" "$GONET" raw-server 127.0.0.1:0 || return ;;
      esac
      local r t0 t1 rate
      t0=$(server_ticks)
      r=$(wrk_run "$n" "http://$ADDR/")
      t1=$(server_ticks)
      rate=$(sed -E 's/.*rate=([0-9.]+).*/\1/' <<<"$r")
      add "${w}_req_per_s" "$rt" "$rate"
      add_cpu "${w}_server_cpu_us_per_req" "$rt" "$t0" "$t1" "$(awk -v r="$rate" -v s="$SECS" 'BEGIN {print r * s}')"
      add "${w}_p99_us" "$rt" "$(sed -E 's/.*p99_us=([0-9.]+).*/\1/' <<<"$r")"
      stop_server ;;
    mixed_*)
      local n=${w#mixed_}
      if [[ $rt == goro ]]; then start_server "$log" "$WEBSERVER" 127.0.0.1:0 || return
      else start_server "$log" "$GONET" http-server 127.0.0.1:0 || return; fi
      local out
      out=$(taskset -c 1 timeout $((SECS + 60)) "$GONET" http-client "$ADDR" "$n" "$SECS" 20)
      add "${w}_req_per_s" "$rt" "$(awk '/RESULT http_rate/ {print $3}' <<<"$out")"
      add "${w}_light_p99_us" "$rt" "$(awk '/RESULT light_p99_us/ {print $3}' <<<"$out")"
      add "${w}_heavy_p99_us" "$rt" "$(awk '/RESULT heavy_p99_us/ {print $3}' <<<"$out")"
      stop_server ;;
    idle_*)
      local n=${w#idle_}
      if [[ $rt == goro ]]; then start_server "$log" "$WEBSERVER" 127.0.0.1:0 || return
      else start_server "$log" "$GONET" http-server 127.0.0.1:0 || return; fi
      local rss0 fifo=$OUT/net_idle.fifo
      rss0=$(awk '/VmRSS/ {print $2}' /proc/$SERVER_PID/status)
      taskset -c 1 timeout 120 "$GONET" idle-client "$ADDR" "$n" 3 >"$fifo" 2>&1 &
      local cpid=$!
      for _ in $(seq 600); do grep -q idle_conns "$fifo" && break; sleep 0.05; done
      sleep 1
      local rss1
      rss1=$(awk '/VmRSS/ {print $2}' /proc/$SERVER_PID/status)
      add "${w}_rss_kib" "$rt" "$rss1"
      add "${w}_rss_growth_kib" "$rt" "$((rss1 - rss0))"
      wait $cpid
      stop_server ;;
  esac
}

declare -A TARGET=(
  [echo_50_rt_per_s]="goro/Go >= 1.3" [echo_1000_rt_per_s]="goro/Go >= 1.3"
  [echo_50_p99_us]="goro/Go <= 1.0" [echo_1000_p99_us]="goro/Go <= 1.0"
  [http_50_req_per_s]="goro/Go >= 1.5, goro/raw >= 1.0" [http_500_req_per_s]="goro/Go >= 1.5, goro/raw >= 1.0"
  [mixed_50_light_p99_us]="goro/Go <= 1.0" [idle_10000_rss_kib]="goro/Go <= 1.0"
)

stats() {  # median min max of the samples
  tr ' ' '\n' <<<"$1" | grep -E '^[0-9.]+$' | sort -g | awk '{a[NR]=$1} END {if (NR==0) {print "- - -"; exit} m=(NR%2)?a[(NR+1)/2]:(a[NR/2]+a[NR/2+1])/2; print m, a[1], a[NR]}'
}

echo "== goro vs Go network benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC'), $RUNS runs x ${SECS}s, load $(cut -d' ' -f1-3 /proc/loadavg)"
for w in "${WORKLOADS[@]}"; do
  for ((i = 1; i <= RUNS; i++)); do
    rts=(goro go)
    [[ $w == http_* ]] && rts=(goro go goraw)
    for rt in "${rts[@]}"; do
      one_run "$w" "$rt"
      echo "  $w run $i/$RUNS $rt done"
    done
  done
done

CSV=$OUT/net_results.csv
echo "metric,goro_median,goro_min,goro_max,go_median,go_min,go_max,raw_median,ratio,raw_ratio,target" >"$CSV"
printf '\n%-26s %28s %28s %18s %8s %9s  %s\n' metric "goro med (min..max)" "Go med (min..max)" "Go raw med" "goro/Go" "goro/raw" target
for key in $(printf '%s\n' "${!RES[@]}" | sed 's/|.*//' | sort -u); do
  read -r gm gmin gmax <<<"$(stats "${RES["$key|goro"]:-}")"
  read -r om omin omax <<<"$(stats "${RES["$key|go"]:-}")"
  read -r rm _ _ <<<"$(stats "${RES["$key|goraw"]:-}")"
  ratio=$(awk -v a="$gm" -v b="$om" 'BEGIN {if (b+0 > 0 && a != "-") printf "%.3f", a/b; else print "-"}')
  rratio=$(awk -v a="$gm" -v b="$rm" 'BEGIN {if (b != "-" && b+0 > 0 && a != "-") printf "%.3f", a/b; else print "-"}')
  printf '%-26s %28s %28s %18s %8s %9s  %s\n' "$key" "$gm ($gmin..$gmax)" "$om ($omin..$omax)" "$rm" "$ratio" "$rratio" "${TARGET[$key]:-}"
  echo "$key,$gm,$gmin,$gmax,$om,$omin,$omax,$rm,$ratio,$rratio,${TARGET[$key]:-}" >>"$CSV"
done
echo "CSV: $CSV"
