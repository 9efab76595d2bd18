#!/usr/bin/env bash
# bench/trace_overhead.sh — what the execution tracer costs, goro beside Go.
#
# Runs each workload with tracing off and on (GORO_TRACE=<file>: goro's
# execution trace; the Go twin starts runtime/trace.Start on the same
# variable), goro and Go interleaved, one process per run, and prints per
# runtime the median time off and on, the overhead (on/off - 1, medians)
# and the min..max of the runs with tracing on, then the median peak RSS
# (VmHWM, MiB) and minor page faults (thousands) off -> on. The traces go to
# /dev/null (goro writes its file at stop, outside the workload's timed part;
# Go streams it while the workload runs), and goro's buffer is raised to
# 512 MiB (GORO_TRACE_BUFFER) so that no event is dropped.
#
# usage: bench/trace_overhead.sh [-n RUNS] [-p "1 2"] [--goro-only] [workload ...]
#   default workloads: gosched spawn_single spawn_chain chan_sync pingpong skynet
# Environment: BUILD_DIR (default <repo>/build/default), GO (default go).
# Builds nothing but the Go twin: build goro_bench first (make bench or
# cmake --build <BUILD_DIR> --target goro_bench).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
GO=${GO:-go}
RUNS=5
PROCS="1 2"
DO_GO=1
while [ $# -gt 0 ]; do
  case "$1" in
    -n) RUNS=$2; shift 2 ;;
    -p) PROCS=$2; shift 2 ;;
    --goro-only) DO_GO=0; shift ;;
    -h|--help) sed -n "2,/^set -u/p" "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "trace_overhead.sh: unknown option $1" >&2; exit 2 ;;
    *) break ;;
  esac
done
WORKLOADS=${*:-"gosched spawn_single spawn_chain chan_sync pingpong skynet"}

GORO_BIN=$BUILD_DIR/bench/goro_bench
[ -x "$GORO_BIN" ] || { echo "trace_overhead.sh: no $GORO_BIN (build goro_bench first)" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
GO_BIN=
if [ "$DO_GO" = 1 ]; then
  if command -v "$GO" >/dev/null 2>&1 &&
    (cd "$ROOT/bench/go" && GOFLAGS=-mod=mod "$GO" build -o "$TMP/gorobench" .) 2>"$TMP/go.log"; then
    GO_BIN=$TMP/gorobench
  else
    echo "# Go side skipped: $(head -c 300 "$TMP/go.log" 2>/dev/null || echo "no $GO")"
  fi
fi

# one BIN WORKLOAD P TRACE: the workload's headline value, peak RSS (KiB)
# and minor faults ("" on failure).
one() {
  local out
  if [ "$4" = on ]; then
    out=$(GOMAXPROCS=$3 GORO_TRACE=/dev/null GORO_TRACE_BUFFER=512 timeout 120 "$1" "$2" 2>/dev/null)
  else
    out=$(GOMAXPROCS=$3 timeout 120 "$1" "$2" 2>/dev/null)
  fi
  # The workload's first metric (named after it, or with a _unit suffix),
  # and the memory lines every run prints.
  awk -v w="$2" '$1=="RESULT" && v=="" && ($2==w || index($2, w "_")==1) {v=$3}
    $1=="RESULT" && $2==w".peak_rss" {r=$3} $1=="RESULT" && $2==w".minflt" {f=$3}
    END {if (v!="") print v, r+0, f+0}' <<<"$out"
}

printf '%-14s %2s  %-5s %10s %10s %9s  %-18s %s\n' workload P side off on overhead "on: min..max" "RSS MiB, kfaults off -> on"
for w in $WORKLOADS; do
  for p in $PROCS; do
    : >"$TMP/goro.txt"
    : >"$TMP/go.txt"
    for _ in $(seq "$RUNS"); do
      for t in off on; do
        echo "$t $(one "$GORO_BIN" "$w" "$p" $t)" >>"$TMP/goro.txt"
        [ -n "$GO_BIN" ] && echo "$t $(one "$GO_BIN" "$w" "$p" $t)" >>"$TMP/go.txt"
      done
    done
    for side in goro go; do
      [ -s "$TMP/$side.txt" ] || continue
      python3 - "$w" "$p" "$side" "$TMP/$side.txt" <<'EOF'
import statistics as st, sys
w, p, side, path = sys.argv[1:]
v = {"off": [], "on": []}
rss = {"off": [], "on": []}
flt = {"off": [], "on": []}
for line in open(path):
    f = line.split()
    if len(f) == 4:
        v[f[0]].append(float(f[1]))
        rss[f[0]].append(float(f[2]) / 1024)
        flt[f[0]].append(float(f[3]) / 1000)
if not v["off"] or not v["on"]:
    print(f"{w:<14} {p:>2}  {side:<5} (failed runs)")
else:
    off, on = st.median(v["off"]), st.median(v["on"])
    rng = f"{min(v['on']):.2f}..{max(v['on']):.2f}"
    print(f"{w:<14} {p:>2}  {side:<5} {off:10.2f} {on:10.2f} {100 * (on / off - 1):+8.0f}%  {rng:<18} "
          f"{st.median(rss['off']):.0f} -> {st.median(rss['on']):.0f}, "
          f"{st.median(flt['off']):.1f} -> {st.median(flt['on']):.1f}")
EOF
    done
  done
done
