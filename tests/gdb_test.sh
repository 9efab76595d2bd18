#!/bin/sh
# gdb_test.sh TARGET EXTENSION WORKDIR [SANITIZER]: the gdb extension (goro-gdb.py) in
# batch mode.
#  1. Live: gdb runs gdb_target, which parks goroutines on a channel, a
#     goro::mutex, a sleep and a select and stops itself (SIGSTOP); the
#     extension lists them with their states and wait reasons and prints
#     each one's backtrace, which must name the user's function.
#  2. Core: the same program, run again, is written out with gcore; the
#     same checks on the core file, with the program as built (DWARF) and
#     with a copy stripped of its debug info (the extension then works from
#     goro_debug_layout and the symbol table alone).
# Sanitizer builds run only the live part: gcore would write out the
# sanitizer's shadow memory (an ASan core ran to 30 GB).
# Exit 77 (ctest: skipped) with the reason when gdb, its Python support or
# ptrace is missing. Every gdb run is bounded (60 s); the core file is
# written to WORKDIR and removed.
set -u
target=$1
ext=$2
work=$3
sanitizer=${4:-}
core="$work/gdb_target.core.$$"
nodebug="$work/gdb_target.nodebug.$$"
trap 'rm -f "$core" "$nodebug"' EXIT INT TERM

skip() {
  echo "SKIPPED: $*"
  exit 77
}
fail=0
check() { # check LABEL OUTPUT PATTERN: OUTPUT has a line matching PATTERN
  if printf '%s\n' "$2" | grep -Eq -- "$3"; then
    echo "ok: $1"
  else
    echo "FAILED: $1: no line matching: $3"
    fail=1
  fi
}

command -v gdb >/dev/null 2>&1 || skip "gdb is not installed"
gdb -batch -nx -ex 'python import gdb.unwinder' >/dev/null 2>&1 ||
  skip "this gdb has no Python support (or no gdb.unwinder)"

# The commands both the live process and the core file get. Goroutine ids
# come from the target's globals (eval), so that nothing assumes how the
# runtime numbers goroutines.
set -- -ex "source $ext" -ex "info goroutines" \
  -ex 'eval "goroutine %lu bt", (unsigned long)gdb_target_goid_chan' \
  -ex 'eval "goroutine %lu bt", (unsigned long)gdb_target_goid_mutex' \
  -ex 'eval "goroutine %lu bt", (unsigned long)gdb_target_goid_sleep' \
  -ex 'eval "goroutine %lu bt", (unsigned long)gdb_target_goid_select' \
  -ex 'goroutine 1 bt' -ex 'goroutine 999999 bt' \
  -ex 'echo after-goroutines\n' -ex 'bt 1'

# What a listing and the backtraces must show (program "as built" or not:
# function names come from DWARF or from the symbol table).
check_all() { # check_all WHAT OUTPUT
  o=$2
  for id_reason_fn in \
    "chan:chan receive:gdb_target_parked_on_channel" \
    "mutex:sync.Mutex.Lock:gdb_target_parked_on_mutex" \
    "sleep:sleep:gdb_target_parked_in_sleep" \
    "select:select:gdb_target_parked_in_select"; do
    name=${id_reason_fn%%:*}
    rest=${id_reason_fn#*:}
    reason=${rest%%:*}
    fn=${rest#*:}
    id=$(printf '%s\n' "$ready" | sed -n "s/.* $name=\([0-9]*\).*/\1/p")
    check "$1: info goroutines: $id waiting [$reason] at $fn" "$o" \
      "^  $id +waiting +\[$reason\] +$fn.*, created by gdb_target_main"
    check "$1: goroutine $id bt names $fn" "$o" "^#[0-9]+ +0x[0-9a-f]+ in $fn"
  done
  check "$1: info goroutines: 1 running in gdb_target_main" "$o" \
    "^\* 1 +running +- +gdb_target_main"
  check "$1: goroutine 1 bt (on its thread)" "$o" \
    "^#[0-9]+ +0x[0-9a-f]+ in gdb_target_main"
  check "$1: goroutine bt ends with created by" "$o" \
    "^created by gdb_target_main\(\) in goroutine 1"
  check "$1: unknown id refused" "$o" "goro: no goroutine 999999"
  # The thread's own frames again once the commands are done.
  check "$1: thread's frames restored" "$o" "^#0 .*(pthread_kill|raise|kill)"
}

# 1. Live process, default settings.
out=$(timeout 60 gdb -batch -nx -ex run "$@" -ex kill "$target" 2>&1)
rc=$?
ready=$(printf '%s\n' "$out" | grep 'gdb_target ready')
if [ -z "$ready" ]; then
  if printf '%s\n' "$out" | grep -Eqi 'ptrace|not permitted|Cannot create process|could not (attach|trace)'; then
    printf '%s\n' "$out" | tail -5
    skip "gdb cannot run the target here (ptrace not permitted)"
  fi
  printf '%s\n' "$out"
  echo "FAILED: the target did not get ready under gdb (rc $rc)"
  exit 1
fi
echo "$ready"
check_all live "$out"
[ $fail -eq 0 ] || printf '%s\n' "--- live output:" "$out"
# 1b. One P: the busy loop was preempted by signal and is runnable; its
# backtrace starts from the signal-saved context (not under TSan, which
# has no signal preemption).
if [ "$sanitizer" != thread ]; then
  out=$(timeout 60 gdb -batch -nx -ex run -ex "source $ext" \
    -ex "info goroutines" \
    -ex 'eval "goroutine %lu bt", (unsigned long)gdb_target_goid_loop' \
    -ex kill --args "$target" 1p 2>&1)
  r1=$(printf '%s\n' "$out" | grep 'gdb_target ready')
  lid=$(printf '%s\n' "$r1" | sed -n 's/.* loop=\([0-9]*\).*/\1/p')
  f0=$fail
  check "preempted: info goroutines: $lid runnable at gdb_target_busy_loop" \
    "$out" "^  $lid +runnable +- +gdb_target_busy_loop"
  check "preempted: goroutine $lid bt names gdb_target_busy_loop" "$out" \
    "^#0 +0x[0-9a-f]+ in gdb_target_busy_loop"
  [ $fail -eq $f0 ] || printf '%s\n' "--- preempted output:" "$out"
fi
if [ -n "$sanitizer" ]; then
  echo "core file part skipped: $sanitizer sanitizer build (its shadow memory would be dumped)"
  exit $fail
fi

# 2. A core file of the same program. gcore cannot read stack chunks whose
# guard pages are madvise(MADV_GUARD_INSTALL) guards (it reads 1 MiB at a
# time and gives up on a piece that holds one), so this run uses mprotect
# guards; MALLOC_ARENA_MAX keeps gcore from writing malloc's reserved
# arenas (64 MiB each) out.
out=$(GORO_STACK_GUARD=mprotect MALLOC_ARENA_MAX=1 timeout 60 gdb -batch -nx \
  -ex run -ex "gcore $core" -ex kill "$target" 2>&1)
ready=$(printf '%s\n' "$out" | grep 'gdb_target ready')
if [ ! -s "$core" ]; then
  printf '%s\n' "$out"
  echo "FAILED: gcore wrote no core file"
  exit 1
fi
echo "core: $ready ($(wc -c <"$core") bytes)"
out=$(timeout 60 gdb -batch -nx "$@" "$target" "$core" 2>&1)
check_all core "$out"
check "core: frames have file:line" "$out" \
  "^#[0-9]+ +0x[0-9a-f]+ in gdb_target_parked_on_channel at .*gdb_target.cpp:[0-9]+"
[ $fail -eq 0 ] || printf '%s\n' "--- core output:" "$out"

# 3. The core again, with the program stripped of its debug info.
f0=$fail
objcopy --strip-debug "$target" "$nodebug" 2>/dev/null ||
  cp "$target" "$nodebug" # (no objcopy: the checks below still apply)
out=$(timeout 60 gdb -batch -nx "$@" "$nodebug" "$core" 2>&1)
check_all "core, no DWARF" "$out"
[ $fail -eq $f0 ] || printf '%s\n' "--- core (no DWARF) output:" "$out"

exit $fail
