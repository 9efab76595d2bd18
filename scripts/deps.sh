#!/usr/bin/env bash
# Checks the build dependencies of goro and installs what is missing.
#
#   scripts/deps.sh [base] [clang] [format] [go] [clients]
#
#   base    cmake, make, g++, GoogleTest, Google Benchmark, pkg-config,
#           Node's http-parser (the web server example), elfutils' libdw
#           headers (file:line in goroutine dumps; optional at run time,
#           installed so that the tests of that feature run) (default)
#   clang   clang++-14 (the clang preset)
#   format  clang-format
#   go      the Go toolchain (golang-go), for the side-by-side benchmarks
#   clients PostgreSQL 15 and libpq, redis-server and hiredis, libcurl: the
#           real servers and client libraries of tests/clientlib_*_test.cpp
#           (optional: without them those tests skip, saying why; `make
#           test` and `make asan` ignore a failure to install them)
#
# Silent when everything is present. When something is missing and we are
# root (CI, a fresh container), runs apt-get install for it (Debian 12);
# otherwise prints the apt-get command and fails.
set -euo pipefail

groups=("$@")
[[ ${#groups[@]} -eq 0 ]] && groups=(base)

missing=()
need() {  # need PACKAGE TEST...: PACKAGE is missing unless the test succeeds
  local pkg=$1
  shift
  if ! "$@" >/dev/null 2>&1; then
    missing+=("$pkg")
  fi
}
have() { command -v "$1"; }
# A file under any of the usual multiarch/system prefixes.
have_file() {
  local f
  for f in "$@"; do
    [[ -e $f ]] && return 0
  done
  return 1
}

for g in "${groups[@]}"; do
  case $g in
    base)
      need cmake have cmake
      need make have make
      need g++ have g++
      need pkgconf have pkg-config
      need libgtest-dev have_file /usr/lib/*/cmake/GTest/GTestConfig.cmake \
        /usr/lib/cmake/GTest/GTestConfig.cmake \
        /usr/local/lib/cmake/GTest/GTestConfig.cmake
      need libgmock-dev have_file /usr/include/gmock/gmock.h \
        /usr/local/include/gmock/gmock.h
      need libbenchmark-dev have_file \
        /usr/lib/*/cmake/benchmark/benchmarkConfig.cmake \
        /usr/lib/cmake/benchmark/benchmarkConfig.cmake \
        /usr/local/lib/cmake/benchmark/benchmarkConfig.cmake
      need libhttp-parser-dev have_file /usr/include/http_parser.h
      need libdw-dev have_file /usr/include/elfutils/libdwfl.h
      ;;
    clang)
      need clang-14 have clang++-14
      ;;
    format)
      if ! have clang-format-14 >/dev/null && ! have clang-format >/dev/null; then
        missing+=(clang-format)
      fi
      ;;
    go)
      need golang-go have go
      ;;
    clients)
      need postgresql-15 have_file /usr/lib/postgresql/15/bin/initdb
      need libpq-dev have_file /usr/include/postgresql/libpq-fe.h
      need redis-server have_file /usr/bin/redis-server
      need libhiredis-dev have_file /usr/include/hiredis/hiredis.h
      need libcurl4-openssl-dev have_file /usr/include/*/curl/curl.h \
        /usr/include/curl/curl.h
      ;;
    *)
      echo "deps.sh: unknown group '$g' (base, clang, format, go, clients)" >&2
      exit 2
      ;;
  esac
done

[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
  echo "deps.sh: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  echo "deps.sh: installed ${missing[*]}" >&2
  exit 0
fi

echo "deps.sh: missing build dependencies: ${missing[*]}" >&2
echo "deps.sh: install them with: sudo apt-get install ${missing[*]}" >&2
exit 1
