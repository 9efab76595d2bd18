#!/usr/bin/env bash
# bench/run.sh — goro vs Go, side by side (called by `make bench`).
#
# Builds the C++ workloads (target goro_bench, in the CMake build directory)
# and their Go twins (bench/go, `go build`, standard library only), then runs
# every workload at each GOMAXPROCS, goro and Go interleaved (per workload:
# warm-up round, then rounds of P=1 goro, P=1 go, P=2 goro, P=2 go), one
# process per run, and prints median, min..max and the goro/Go ratio of the
# medians, plus a CSV file. Statistics are done by bench_report (bench/report.cpp).
# Where Boost.Fiber is installed (apt-get install libboost-fiber-dev), its
# twins (bench/boost, target boost_bench) run too, as a third column.
# Per-workload settings (GOMAXPROCS, warm-up, extra environment of one
# runtime): bench/workloads.txt.
#
# usage: bench/run.sh [options] [workload ...]
#   -n, --runs N        measured runs per runtime and cell   (BENCH_RUNS, 5)
#   -w, --warmup N      discarded warm-up runs                (BENCH_WARMUP, 1)
#   -p, --procs "1 2"   GOMAXPROCS values                     (BENCH_PROCS, "1 2")
#   -t, --timeout SEC   time limit per run; SIGQUIT, then KILL (BENCH_TIMEOUT, 120)
#       --goro-only     skip the Go side
#       --go-only       skip the goro side (e.g. while the runtime does not build)
#       --no-build      use the binaries already built
#       --no-boost      skip the Boost.Fiber column
#       --report-only   no builds, no runs: the report (and --docs) of the
#                       previous run in this build directory, from its raw.txt
#       --docs          also write the report into docs/benchmarks.md (between
#                       its generated-section markers) and docs/benchmarks.svg
#                       (only for a run of all workloads; `make bench` does)
#   workloads           default: all (`goro_bench --list`); BENCH_WORKLOADS also works
# Environment: BUILD_DIR (default <repo>/build/default), GO (default go),
#   BENCH_SETTINGS (default bench/workloads.txt),
#   JOBS (build parallelism).
# Output: <BUILD_DIR>/bench/results.csv, report.txt, report.md, report.svg,
#   raw.txt, logs/ (failed runs).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BUILD_DIR=${BUILD_DIR:-$ROOT/build/default}
RUNS=${BENCH_RUNS:-5}
WARMUP=${BENCH_WARMUP:-1}
PROCS=${BENCH_PROCS:-"1 2"}
TIMEOUT=${BENCH_TIMEOUT:-120}
WORKLOADS=${BENCH_WORKLOADS:-}
GO=${GO:-go}
DO_GORO=1
DO_GO=1
DO_BUILD=1
DO_BOOST=1
DO_DOCS=0
REPORT_ONLY=0

usage() { sed -n "2,/^set -u/p" "${BASH_SOURCE[0]}" | sed "\$d; s/^# \\{0,1\\}//"; }

while [ $# -gt 0 ]; do
  case "$1" in
    -n|--runs) RUNS=$2; shift 2 ;;
    -w|--warmup) WARMUP=$2; shift 2 ;;
    -p|--procs) PROCS=$2; shift 2 ;;
    -t|--timeout) TIMEOUT=$2; shift 2 ;;
    --goro-only) DO_GO=0; shift ;;
    --go-only) DO_GORO=0; shift ;;
    --no-build) DO_BUILD=0; shift ;;
    --no-boost) DO_BOOST=0; shift ;;
    --docs) DO_DOCS=1; shift ;;
    --report-only) REPORT_ONLY=1; DO_BUILD=0; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "unknown option: $1" >&2; usage >&2; exit 2 ;;
    *) WORKLOADS="$WORKLOADS $1"; shift ;;
  esac
done
case "$RUNS$WARMUP$TIMEOUT" in
  *[!0-9]*) echo "runs, warm-up and timeout must be integers" >&2; exit 2 ;;
esac
if [ "$RUNS" -lt 1 ]; then echo "need at least one measured run" >&2; exit 2; fi

OUT=$BUILD_DIR/bench
GORO_BIN=$OUT/goro_bench
REPORT_BIN=$OUT/bench_report
BOOST_BIN=$OUT/boost_bench
SETTINGS=${BENCH_SETTINGS:-$ROOT/bench/workloads.txt}
ALL_WORKLOADS=1
[ -n "${WORKLOADS// /}" ] && ALL_WORKLOADS=0
GO_DIR=$OUT/go
GO_BIN=$GO_DIR/gorobench
mkdir -p "$OUT/logs" "$GO_DIR"

say() { printf '%s\n' "$*" >&2; }

# A report-only call skips to the report with the previous run's settings.
if [ "$REPORT_ONLY" = 1 ]; then
  if [ ! -f "$OUT/run_info" ] || [ ! -f "$OUT/raw.txt" ]; then
    say "no previous run in $OUT (run_info, raw.txt)"
    exit 1
  fi
  [ -x "$REPORT_BIN" ] || { say "$REPORT_BIN not built"; exit 1; }
fi
if [ "$REPORT_ONLY" = 0 ]; then
# --- build -----------------------------------------------------------------
if [ "$DO_BUILD" = 1 ]; then
  if [ ! -f "$BUILD_DIR/CMakeCache.txt" ]; then
    if [ -f "$ROOT/CMakePresets.json" ] && [ "$BUILD_DIR" = "$ROOT/build/default" ]; then
      say "== configuring: cmake --preset default"
      (cd "$ROOT" && cmake --preset default) >&2 || exit 1
    else
      say "== configuring: cmake -S $ROOT -B $BUILD_DIR -DCMAKE_BUILD_TYPE=Release"
      cmake -S "$ROOT" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >&2 || exit 1
    fi
  fi
  targets="bench_report"
  [ "$DO_GORO" = 1 ] && targets="goro_bench $targets"
  say "== building $targets"
  # shellcheck disable=SC2086
  # (env -u: CMake's own makefiles must not join an outer make's jobserver)
  if ! env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS \
       cmake --build "$BUILD_DIR" --target $targets -j "${JOBS:-$(nproc)}" >&2; then
    if [ "$DO_GORO" = 1 ]; then
      say "error: building goro_bench failed (use --go-only to measure Go alone)"
      exit 1
    fi
  fi
  # boost_bench exists only where CMake found Boost.Fiber (bench/CMakeLists.txt).
  if [ "$DO_BOOST" = 1 ] && [ -d "$BUILD_DIR/bench/CMakeFiles/boost_bench.dir" ]; then
    say "== building boost_bench"
    if ! env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS \
         cmake --build "$BUILD_DIR" --target boost_bench -j "${JOBS:-$(nproc)}" >&2; then
      say "warning: building boost_bench failed: no Boost.Fiber column"
      DO_BOOST=0
    fi
  fi
fi
BOOST_VERSION="(not used: --no-boost)"
if [ "$DO_BOOST" = 1 ]; then
  if [ -x "$BOOST_BIN" ]; then
    BOOST_VERSION="Boost.Fiber $(sed -n 's/^#define BOOST_LIB_VERSION "\(.*\)"/\1/p' /usr/include/boost/version.hpp 2>/dev/null | tr _ .): work_stealing scheduler (suspend = true) on GOMAXPROCS threads, round_robin at 1; 8 KiB fixedsize stacks (bench/boost)"
  else
    say ""
    say "Boost.Fiber not found: apt-get install libboost-fiber-dev (then re-run; CMake"
    say "finds it on its next configure). Running without the Boost column."
    say ""
    BOOST_VERSION="Boost.Fiber not found: apt-get install libboost-fiber-dev"
    DO_BOOST=0
  fi
fi
# The report works without CMake too.
if [ ! -x "$REPORT_BIN" ]; then
  say "== compiling bench_report directly"
  "${CXX:-c++}" -std=c++20 -O2 -o "$REPORT_BIN" "$ROOT/bench/report.cpp" || exit 1
fi
if [ "$DO_GORO" = 1 ] && [ ! -x "$GORO_BIN" ]; then
  say "error: $GORO_BIN not built"
  exit 1
fi

GO_VERSION="(not used)"
if [ "$DO_GO" = 1 ]; then
  if ! command -v "$GO" >/dev/null 2>&1; then
    say ""
    say "Go not found: apt-get install golang-go (Debian 12 ships Go 1.19)"
    say "Running the goro side alone."
    say ""
    DO_GO=0
    GO_VERSION="Go not found: apt-get install golang-go (Debian 12 ships Go 1.19)"
  else
    GO_VERSION=$("$GO" version)
    if [ "$DO_BUILD" = 1 ] || [ ! -x "$GO_BIN" ]; then
      say "== building Go twins: go build -o $GO_BIN (bench/go)"
      # Works as root without a home: caches live in the build directory,
      # and the module proxy is never contacted (standard library only).
      if ! (cd "$ROOT/bench/go" &&
            GOPATH="$GO_DIR/gopath" GOCACHE="$GO_DIR/cache" GOENV=off \
            GOPROXY=off GOFLAGS="" GO111MODULE=on \
            "$GO" build -o "$GO_BIN" .) >&2; then
        say "error: go build failed"
        exit 1
      fi
    fi
  fi
fi
if [ "$DO_GORO" = 0 ] && [ "$DO_GO" = 0 ]; then
  say "nothing to run"
  exit 1
fi

# --- workloads ---------------------------------------------------------------
if [ -z "${WORKLOADS// /}" ]; then
  WORKLOADS=""
  [ "$DO_GORO" = 1 ] && WORKLOADS=$("$GORO_BIN" --list)
  if [ "$DO_GO" = 1 ]; then
    for w in $("$GO_BIN" --list); do
      case " $WORKLOADS " in *[[:space:]]"$w"[[:space:]]*) ;; *) WORKLOADS="$WORKLOADS $w" ;; esac
    done
  fi
fi
# shellcheck disable=SC2086,SC2116  # normalise whitespace
WORKLOADS=$(echo $WORKLOADS)
BOOST_WORKLOADS=""
[ "$DO_BOOST" = 1 ] && BOOST_WORKLOADS=" $("$BOOST_BIN" --list | tr '\n' ' ')"

# settings_of <workload>: the words after its name in bench/workloads.txt.
settings_of() {
  [ -f "$SETTINGS" ] || return 0
  awk -v w="$1" '{ sub(/#.*/, "") } $1 == w { $1 = ""; print }' "$SETTINGS"
}
# Check the settings file once, so a typo is an error, not a silent default.
if [ -f "$SETTINGS" ]; then
  bad=$(awk '{ sub(/#.*/, "") } NF {
      for (i = 2; i <= NF; i++)
        if ($i !~ /^(procs|warmup)=[0-9]+$/ && $i !~ /^(goro|go|boost):[A-Za-z_][A-Za-z0-9_]*=/)
          print FILENAME ":" NR ": bad setting \"" $i "\" of " $1 }' "$SETTINGS")
  if [ -n "$bad" ]; then say "$bad"; say "(settings: procs=N warmup=N goro|go|boost:VAR=value)"; exit 2; fi
fi

# --- header ------------------------------------------------------------------
cache_var() { sed -n "s/^$1:[A-Z]*=//p" "$BUILD_DIR/CMakeCache.txt" 2>/dev/null | head -1; }
BUILD_TYPE=$(cache_var CMAKE_BUILD_TYPE)
CXX_PATH=$(cache_var CMAKE_CXX_COMPILER)
CXX_VERSION=$([ -n "$CXX_PATH" ] && "$CXX_PATH" --version 2>/dev/null | head -1)
# The commit measured, and whether the runtime's sources differed from it.
GIT_REV=$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo "?")
GIT_DIRTY=$(git -C "$ROOT" status --porcelain -- src include bench 2>/dev/null | wc -l)
[ "$GIT_DIRTY" -gt 0 ] && GIT_REV="$GIT_REV + uncommitted changes in $GIT_DIRTY files of src/ include/ bench/"
CPU=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
MEM=$(awk '/^MemTotal/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
HEADER=$(cat <<EOF
goro vs Go — side-by-side scheduler benchmarks, $(date -u '+%Y-%m-%d %H:%M UTC')
host:      nproc $(nproc), kernel $(uname -r), $CPU, $MEM, load $(cut -d' ' -f1-3 /proc/loadavg)
go:        $GO_VERSION
boost:     $BOOST_VERSION
goro:      build ${BUILD_TYPE:-?} in $BUILD_DIR, ${CXX_VERSION:-compiler ?}, commit $GIT_REV
runs:      $WARMUP warm-up + $RUNS measured per workload, GOMAXPROCS and runtime; rounds interleave P and goro/go; one process each; timeout ${TIMEOUT}s
procs:     GOMAXPROCS = $PROCS
workloads: $WORKLOADS
EOF
)
echo "$HEADER"
if awk -v n="$(nproc)" '{ exit !($1 > 0.5 * n) }' /proc/loadavg; then
  echo "WARNING: the machine is busy (load $(cut -d' ' -f1 /proc/loadavg) on $(nproc) CPUs): numbers will be noisy"
fi
case "$DO_GORO:$BUILD_TYPE" in
  0:*|*:Release|*:RelWithDebInfo|*:MinSizeRel) ;;
  *) echo "WARNING: CMAKE_BUILD_TYPE='$BUILD_TYPE': benchmark an optimised build (Release)" ;;
esac
echo

# --- runs ----------------------------------------------------------------------
RAW=$OUT/raw.txt
: >"$RAW"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# run_one <runtime> <procs> <run (0 = warm-up)> <workload> [VAR=value ...]
# Appends RESULT/CHECK/FAIL lines to $RAW (not for warm-ups, except FAIL),
# sets LAST_SUMMARY and returns non-zero on failure.
run_one() {
  local rt=$1 procs=$2 run=$3 wl=$4 bin log rc reason
  shift 4
  case "$rt" in
    goro) bin=$GORO_BIN ;;
    go) bin=$GO_BIN ;;
    *) bin=$BOOST_BIN ;;
  esac
  log=$TMP/out
  # (in a subshell, so a "Killed" notice goes to the log, not the terminal)
  (env GOMAXPROCS="$procs" "$@" timeout -s QUIT -k 10 "$TIMEOUT" "$bin" "$wl"; exit $?) >"$log" 2>&1
  rc=$?
  reason=""
  if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
    reason="timeout after ${TIMEOUT}s"
  elif [ $rc -ne 0 ]; then
    reason="exit status $rc"
  elif ! grep -q '^RESULT ' "$log"; then
    reason="no RESULT line"
  fi
  if [ -n "$reason" ]; then
    local keep=$OUT/logs/$rt-P$procs-$wl-run$run.log
    # Goroutine dumps of a million goroutines are huge: keep head and tail.
    if [ "$(stat -c %s "$log")" -gt 2097152 ]; then
      { head -c 1048576 "$log"; printf '\n... (%s bytes cut) ...\n' "$(stat -c %s "$log")"
        tail -c 262144 "$log"; } >"$keep"
    else
      cp "$log" "$keep"
    fi
    echo "FAIL $rt $procs $run $wl $reason" >>"$RAW"
    LAST_SUMMARY="FAILED: $reason (log: $keep)"
    return 1
  fi
  if [ "$run" -gt 0 ]; then
    awk -v rt="$rt" -v p="$procs" -v r="$run" -v wl="$wl" '
      $1 == "RESULT" && NF >= 4 { print "RESULT", rt, p, r, wl, $2, $3, $4 }
      $1 == "CHECK" && NF >= 3 { print "CHECK", rt, p, r, wl, $3 }' "$log" >>"$RAW"
  fi
  LAST_SUMMARY=$(awk '$1 == "RESULT" { printf "%s%s=%s %s", sep, $2, $3, $4; sep = ", " }' "$log")
  return 0
}

ALL_RUNTIMES=""
[ "$DO_GORO" = 1 ] && ALL_RUNTIMES="goro"
[ "$DO_GO" = 1 ] && ALL_RUNTIMES="$ALL_RUNTIMES go"
[ "$DO_BOOST" = 1 ] && ALL_RUNTIMES="$ALL_RUNTIMES boost"

START=$(date +%s)
# Interleaved at every level that a ratio is taken over: per workload, each
# round runs every GOMAXPROCS value and, within it, goro then Go, so slow
# drifts of the machine (other load, frequency) hit all cells alike.
for wl in $WORKLOADS; do
  declare -A failed=()
  wl_start=$(date +%s)
  wl_procs=$PROCS
  wl_warmup=$WARMUP
  declare -A wl_env=([goro]="" [go]="" [boost]="")
  for setting in $(settings_of "$wl"); do
    case "$setting" in
      procs=*) wl_procs=${setting#procs=} ;;
      warmup=*) wl_warmup=${setting#warmup=} ;;
      *:*=*) wl_env[${setting%%:*}]="${wl_env[${setting%%:*}]} ${setting#*:}" ;;
    esac
  done
  RUNTIMES=""
  for rt in $ALL_RUNTIMES; do
    case "$rt" in
      boost) case "$BOOST_WORKLOADS " in *" $wl "*) RUNTIMES="$RUNTIMES boost" ;; esac ;;
      *) RUNTIMES="$RUNTIMES $rt" ;;
    esac
  done
  for run in $(seq $((1 - wl_warmup)) "$RUNS"); do
    if [ "$run" -le 0 ]; then label="warm-up"; else label="run $run/$RUNS"; fi
    for procs in $wl_procs; do
      for rt in $RUNTIMES; do
        # Stop a cell (runtime, P) after a failed warm-up or 2 failed runs.
        cell="$rt:$procs"
        if [ "${failed[$cell]:-0}" -ge 2 ]; then continue; fi
        # shellcheck disable=SC2086  # the VAR=value words split on purpose
        if run_one "$rt" "$procs" "$run" "$wl" ${wl_env[$rt]}; then
          :
        elif [ "$run" -le 0 ]; then
          failed[$cell]=2
        else
          failed[$cell]=$(( ${failed[$cell]:-0} + 1 ))
        fi
        printf '  %-14s %-9s P=%s %-5s %s\n' "$wl" "$label" "$procs" "$rt" "$LAST_SUMMARY" >&2
      done
    done
  done
  say "  ($wl took $(( $(date +%s) - wl_start )) s)"
  unset failed wl_env
done
ELAPSED=$(( $(date +%s) - START ))
say "  (runs took $ELAPSED s)"
# What --report-only needs to redo the report (and the docs) of this run.
declare -p HEADER START ELAPSED ALL_WORKLOADS DO_BOOST BOOST_VERSION WARMUP \
  RUNS >"$OUT/run_info"
fi  # REPORT_ONLY = 0
if [ "$REPORT_ONLY" = 1 ]; then
  # shellcheck disable=SC1091
  . "$OUT/run_info"
  RAW=$OUT/raw.txt
  TMP=$(mktemp -d)
  trap 'rm -rf "$TMP"' EXIT
fi

# --- report --------------------------------------------------------------------
CSV=$OUT/results.csv
"$REPORT_BIN" "$RAW" "$ROOT/bench/targets.txt" "$CSV" \
  --markdown "$OUT/report.md" --svg "$OUT/report.svg" >"$TMP/table" || exit 1
{ echo "$HEADER"; echo; cat "$TMP/table"; } >"$OUT/report.txt"
echo
cat "$TMP/table"
echo
echo "CSV:    $CSV"
echo "report: $OUT/report.txt (markdown: report.md, plot: report.svg)   raw: $RAW"

# --- docs/benchmarks.md and docs/benchmarks.svg ---------------------------------
# The generated section lies between two marker lines; the rest of the file
# is kept as written. Only a run of every workload replaces it.
if [ "$DO_DOCS" = 1 ]; then
  DOC=$ROOT/docs/benchmarks.md
  BEGIN='<!-- BEGIN GENERATED by bench/run.sh --docs (make bench): edits here are overwritten -->'
  END='<!-- END GENERATED by bench/run.sh --docs -->'
  if [ "$ALL_WORKLOADS" = 0 ]; then
    say "docs/benchmarks.md not updated: only a run of all workloads writes it"
  elif [ ! -f "$DOC" ] || ! grep -qxF "$BEGIN" "$DOC" || ! grep -qxF "$END" "$DOC"; then
    say "docs/benchmarks.md not updated: it lacks the marker lines"
    say "  $BEGIN"
    say "  $END"
  else
    LOAD_END=$(cut -d' ' -f1-3 /proc/loadavg)
    {
      echo "$BEGIN"
      echo
      echo "## Full report, $(date -u -d "@$START" '+%Y-%m-%d %H:%M UTC') (generated)"
      echo
      echo "\`make bench\` (\`bench/run.sh --docs\`): every workload in bench/, goro against Go"
      [ "$DO_BOOST" = 1 ] && echo "and, where a twin exists, Boost.Fiber (bench/boost)," || echo "(no Boost.Fiber column: $BOOST_VERSION),"
      echo "$WARMUP warm-up + $RUNS measured runs per cell (bench/workloads.txt may change the warm-up"
      echo "and GOMAXPROCS of a workload), median per cell, one process per run; the runs took"
      echo "$((ELAPSED / 60)) min $((ELAPSED % 60)) s. Load average at the start $(sed -n 's/^host:.*load //p' <<<"$HEADER"), at the end $LOAD_END."
      echo "**The machine is shared** (2 vCPUs; other work ran beside the benchmark), so read the"
      echo "goro/Go and Boost/Go ratios, not the absolute values: both sides of a ratio ran"
      echo "interleaved under the same conditions. Ratios are of medians; lower is better except"
      echo "where a row says otherwise. Plot of the ratios: [benchmarks.svg](benchmarks.svg)."
      echo
      echo "![goro/Go and Boost/Go ratios per workload](benchmarks.svg)"
      echo
      echo '```'
      echo "$HEADER"
      echo '```'
      echo
      cat "$OUT/report.md"
      echo
      echo "$END"
    } >"$TMP/section"
    bash "$ROOT/bench/splice_section.sh" "$DOC" "$TMP/section" || exit 1
    cp "$OUT/report.svg" "$ROOT/docs/benchmarks.svg"
    say "wrote docs/benchmarks.md (generated section) and docs/benchmarks.svg"
  fi
fi
