#!/usr/bin/env bash
# Installs a configured+built goro build tree into a fresh prefix outside
# every default search path (a mktemp directory) and builds the out-of-tree
# project tests/consumer against it, as a user would:
#   1. CMake: find_package(goro) with CMAKE_PREFIX_PATH=<prefix>
#      -> goro::goro (shared) and goro::goro_static
#   2. pkg-config with PKG_CONFIG_PATH=<prefix>/lib/pkgconfig, the documented
#      line:  c++ -std=c++20 main.cpp $(pkg-config --cflags --libs goro)
#      and the static variant with goro-static
# Then it runs every binary (each must exit 0) with LD_LIBRARY_PATH unset:
# a binary linked with the shared library must find it through its run path.
# It also checks which binaries depend on libgoro.so.
#
#   scripts/consumer.sh [BUILD_DIR]      (default build/default)
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$root/build/default}" && pwd)
out=$build/consumer
jobs=${JOBS:-2}
# Called from make: let the nested CMake builds be top-level makes.
unset MAKEFLAGS MFLAGS MAKELEVEL
log=$build/consumer.log

prefix=$(mktemp -d "${TMPDIR:-/tmp}/goro-consumer-prefix.XXXXXX")
cleanup() { rm -rf "$prefix"; }
trap cleanup EXIT

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

rm -rf "$out" "$build/stage"
mkdir -p "$out"
: >"$log"

echo "consumer: installing into $prefix"
cmake --install "$build" --prefix "$prefix" >>"$log" 2>&1 ||
  fail "cmake --install"

run() {  # run BINARY: must exit 0 within 60 s, without LD_LIBRARY_PATH
  local rc=0
  env -u LD_LIBRARY_PATH timeout 60 "$@" >>"$log" 2>&1 || rc=$?
  [[ $rc -eq 0 ]] || fail "$* exited with $rc (LD_LIBRARY_PATH unset)"
  echo "consumer: ok   $(basename "$1")"
}

needs_libgoro() {  # needs_libgoro BINARY: true if it has libgoro.so NEEDED
  LC_ALL=C readelf -d "$1" | grep -q 'NEEDED.*\[libgoro\.so'
}

echo "consumer: CMake build of tests/consumer (find_package(goro))"
cmake -S "$root/tests/consumer" -B "$out/cmake" \
  -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" \
  -DCMAKE_BUILD_TYPE=Release >>"$log" 2>&1 || fail "configure tests/consumer"
cmake --build "$out/cmake" -j "$jobs" >>"$log" 2>&1 ||
  fail "build tests/consumer"
needs_libgoro "$out/cmake/goro_consumer" ||
  fail "goro_consumer (goro::goro) does not link libgoro.so"
! needs_libgoro "$out/cmake/goro_consumer_static" ||
  fail "goro_consumer_static (goro::goro_static) links libgoro.so"
run "$out/cmake/goro_consumer"
run "$out/cmake/goro_consumer_static"

pcdir=$(dirname "$(find "$prefix" -name goro.pc -print -quit)")
[[ -f $pcdir/goro.pc && -f $pcdir/goro-static.pc ]] ||
  fail "no goro.pc and goro-static.pc under $prefix"
export PKG_CONFIG_PATH=$pcdir

echo "consumer: pkg-config build of tests/consumer/main.cpp (goro)"
flags=$(pkg-config --cflags --libs goro) ||
  fail "pkg-config --cflags --libs goro"
# shellcheck disable=SC2086 # word splitting of pkg-config output is intended
"$cxx" -std=c++20 -O2 "$root/tests/consumer/main.cpp" \
  -o "$out/goro_consumer_pc" $flags >>"$log" 2>&1 ||
  fail "pkg-config build ($flags)"
needs_libgoro "$out/goro_consumer_pc" ||
  fail "goro_consumer_pc ($flags) does not link libgoro.so"
run "$out/goro_consumer_pc"

echo "consumer: pkg-config build of tests/consumer/main.cpp (goro-static)"
flags=$(pkg-config --cflags --libs goro-static) ||
  fail "pkg-config --cflags --libs goro-static"
# shellcheck disable=SC2086 # word splitting of pkg-config output is intended
"$cxx" -std=c++20 -O2 "$root/tests/consumer/main.cpp" \
  -o "$out/goro_consumer_pc_static" $flags >>"$log" 2>&1 ||
  fail "pkg-config static build ($flags)"
! needs_libgoro "$out/goro_consumer_pc_static" ||
  fail "goro_consumer_pc_static ($flags) links libgoro.so"
run "$out/goro_consumer_pc_static"

echo "consumer: PASSED (CMake package shared and static, pkg-config goro" \
  "and goro-static, installed in a custom prefix, run without" \
  "LD_LIBRARY_PATH)"
