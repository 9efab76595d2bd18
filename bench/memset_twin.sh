#!/usr/bin/env bash
# memset_twin.sh: issue 23 item 4's twin. Runs goro_memset_twin (64 MB
# memset + memcpy rounds) in N fresh processes per mode, alternating
# thread, goroutine, thread, ..., and prints median/min/max wall ms per
# mode, the goroutine/thread ratio of the medians (target <= 1.05; also of
# the loop thread's CPU time, which a loaded machine inflates less), the
# median preemption signals per second, and peak RSS / minor faults.
#
#   bench/memset_twin.sh [--no-build] [-n N] [-k ROUNDS]
# The environment (GORO_TIMESLICE, GORO_DEBUG) passes through to the runs;
# MEMSET_TWIN_BIN=path runs another build of the program (with --no-build).
set -euo pipefail
cd "$(dirname "$0")/.."
build=1 n=5 k=100
while [[ $# -gt 0 ]]; do
  case $1 in
    --no-build) build=0 ;;
    -n) n=$2; shift ;;
    -k) k=$2; shift ;;
    *) echo "usage: $0 [--no-build] [-n N] [-k ROUNDS]" >&2; exit 2 ;;
  esac
  shift
done
bin=${MEMSET_TWIN_BIN:-build/default/bench/goro_memset_twin}
if [[ $build == 1 ]]; then
  cmake --preset default >/dev/null
  cmake --build --preset default -j2 --target goro_memset_twin >/dev/null
fi

out=$(mktemp); trap 'rm -f "$out"' EXIT
echo "# $(date -u '+%Y-%m-%d %H:%M:%S UTC'), load $(cut -d' ' -f1-3 /proc/loadavg)," \
  "n=$n rounds=$k GORO_TIMESLICE=${GORO_TIMESLICE:-} GORO_DEBUG=${GORO_DEBUG:-}"
for ((i = 0; i < n; i++)); do
  for mode in thread goroutine; do
    timeout 60 "$bin" "$mode" "$k" | tee -a "$out"
  done
done

# field MODE KEY: the values of KEY= on MODE's lines, one per line.
field() { grep "^mode=$1 " "$out" | tr ' ' '\n' | sed -n "s/^$2=//p"; }
# stats: "median min max" of numbers on stdin.
stats() { sort -g | awk '{v[NR]=$1} END {printf "%s %s %s\n", v[int((NR+1)/2)], v[1], v[NR]}'; }
declare -A wall cpu
for mode in thread goroutine; do
  read -r med lo hi < <(field $mode ms | stats)
  read -r c _ _ < <(field $mode cpu_ms | stats)
  read -r rss _ _ < <(field $mode maxrss_kb | stats)
  read -r flt _ _ < <(field $mode minflt | stats)
  printf '%-9s median %7.1f ms  min %7.1f  max %7.1f  cpu %7.1f ms  rss %d kB  minflt %d\n' \
    "$mode" "$med" "$lo" "$hi" "$c" "$rss" "$flt"
  wall[$mode]=$med cpu[$mode]=$c
done
read -r sps lo hi < <(field goroutine signals_per_s | stats)
awk -v g="${wall[goroutine]}" -v t="${wall[thread]}" -v gc="${cpu[goroutine]}" -v tc="${cpu[thread]}" \
  -v s="$sps" -v lo="$lo" -v hi="$hi" 'BEGIN {
  printf "ratio goroutine/thread %.3f wall (target <= 1.05), %.3f cpu; ", g/t, gc/tc
  printf "signals/s median %.1f (min %.1f max %.1f)\n", s, lo, hi }'
