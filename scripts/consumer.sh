#!/usr/bin/env bash
# Installs a configured+built goro build tree into BUILD/stage and builds the
# out-of-tree project tests/consumer against it, twice:
#   1. with CMake: find_package(goro) -> goro::goro (shared), goro::goro_static
#   2. with pkg-config: c++ -std=c++20 main.cpp $(pkg-config --cflags --libs goro)
# and runs each binary (each must exit 0).
#
#   scripts/consumer.sh [BUILD_DIR]      (default build/default)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/default}" && pwd)
stage=$build/stage
out=$build/consumer
jobs=${JOBS:-2}
# Called from make: let the nested CMake builds be top-level makes.
unset MAKEFLAGS MFLAGS MAKELEVEL
log=$build/consumer.log

fail() {
  echo "consumer: FAILED: $*" >&2
  if [[ -s $log ]]; then
    echo "---- $log ----" >&2
    tail -n 60 "$log" >&2
  fi
  exit 1
}

cache_get() {  # value of a CMake cache variable of the goro build
  sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt" | head -n1
}
cxx=$(cache_get CMAKE_CXX_COMPILER)
[[ -n $cxx ]] || fail "$build is not a configured goro build tree"

rm -rf "$stage" "$out"
: >"$log"

echo "consumer: installing into $stage"
cmake --install "$build" --prefix "$stage" >>"$log" 2>&1 ||
  fail "cmake --install"

echo "consumer: CMake build of tests/consumer (find_package(goro))"
cmake -S "$root/tests/consumer" -B "$out" \
  -DCMAKE_PREFIX_PATH="$stage" \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 || fail "configure tests/consumer"
cmake --build "$out" -j "$jobs" >>"$log" 2>&1 || fail "build tests/consumer"

run() {  # run BINARY: must exit 0 within 60 s
  local rc=0
  timeout 60 "$@" >>"$log" 2>&1 || rc=$?
  [[ $rc -eq 0 ]] || fail "$* exited with $rc"
  echo "consumer: ok   $(basename "$1")"
}
run "$out/goro_consumer"
run "$out/goro_consumer_static"

echo "consumer: pkg-config build of tests/consumer/main.cpp"
pc=$(find "$stage" -name goro.pc -print -quit)
[[ -n $pc ]] || fail "no goro.pc under $stage"
libdir=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --variable=libdir goro)
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs goro) ||
  fail "pkg-config --cflags --libs goro"
# shellcheck disable=SC2086 # word splitting of pkg-config output is intended
"$cxx" -std=c++20 -O2 "$root/tests/consumer/main.cpp" -o "$out/goro_consumer_pc" \
  $flags -Wl,-rpath,"$libdir" >>"$log" 2>&1 || fail "pkg-config build ($flags)"
run "$out/goro_consumer_pc"

echo "consumer: PASSED (CMake package, static library, pkg-config)"
