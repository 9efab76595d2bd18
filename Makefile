# goro — convenience front end over CMake presets (see CMakePresets.json).
#
#   make / make build    deps check and Release build (preset default, build/default)
#   make demo            the tour: examples/demo.cpp (G-M-P, SCHED lines, work stealing...), then webserver --demo
#   make examples        build and run every program of examples/ with small parameters (ctest -L example)
#   make test            Release build, the whole ctest suite (incl. doc snippets, examples), then make consumer
#   make consumer        install into a temporary prefix and build tests/consumer against it (after make test)
#   make bench           goro, Go 1.19 and Boost.Fiber side by side (bench/run.sh; BENCH_ARGS="--goro-only" etc.);
#                        writes docs/benchmarks.md's generated section and docs/benchmarks.svg
#   make asan | tsan     build + test under ASan+UBSan | TSan
#   make debug           build + test with assertions on (lock-rank checks, checkdead)
#   make debug-core      the same for the scheduler's own tests only (CI: the ASan and
#                        TSan presets run every test with assertions on already)
#   make clang           build + test with clang++-14
#   make o3 | clang-o3   build + test at -O3 (TLS accessors not cached across a switch)
#   make format          clang-format 14 on include/ src/ tests/ bench/ examples/
#   make format-check    the same, checking only
#   make install         headers, libraries, CMake package, goro.pc into PREFIX (default /usr/local)
#   make deps            install missing build dependencies (scripts/deps.sh; apt-get when root)
#   make deps-clients    PostgreSQL, Redis, libpq, hiredis, libcurl for tests/clientlib_*_test.cpp
#                        (optional: make test and make asan try it; without them those tests skip)
#   make clean           remove build/
#   make help            this list
#
# CI (.ci/run) runs make test, make asan, make tsan and make debug-core.
# JOBS=N sets the build/test parallelism (default 2).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := all

JOBS   ?= 2
PREFIX ?= /usr/local
CMAKE  ?= cmake
CTEST  ?= ctest
CLANG_FORMAT ?= $(shell command -v clang-format-14 || command -v clang-format || echo clang-format)

FORMAT_DIRS := include src tests bench examples
FORMAT_FILES = $(shell find $(FORMAT_DIRS) -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' -o -name '*.cc' \) -not -path '*/build/*' 2>/dev/null | sort)

# CMake's generated makefiles run as top-level makes with their own -j
# (no jobserver clash, no "Entering directory" noise).
TOPLEVEL := env -u MAKELEVEL -u MAKEFLAGS -u MFLAGS

# configure + build a preset: $(call build_preset,PRESET[,TARGETS])
define build_preset
	$(CMAKE) --preset $(1)
	$(TOPLEVEL) $(CMAKE) --build --preset $(1) -j $(JOBS) $(if $(2),--target $(2))
endef

# configure + build + ctest a preset
define test_preset
	$(call build_preset,$(1))
	$(CTEST) --preset $(1) -j $(JOBS) --output-on-failure
endef

.PHONY: all deps deps-clients build demo examples test consumer bench asan tsan clang \
        debug debug-core o3 clang-o3 format format-check install clean help

all: build

help:
	@sed -n '2,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@bash scripts/deps.sh base

build: deps
	$(call build_preset,default)

# The tour records the work-stealing part as an execution trace and, when
# the goro_tracesvg tool builds, renders it as an SVG timeline.
DEMO_TRACE := build/default/work_stealing.trace.json
DEMO_SVG   := build/default/work_stealing.svg
demo: deps
	$(call build_preset,default,demo webserver)
	./build/default/examples/demo --trace $(DEMO_TRACE)
	@if $(TOPLEVEL) $(CMAKE) --build --preset default -j $(JOBS) --target goro_tracesvg >/dev/null 2>&1; then \
	  svg=$$(find build/default -name goro_tracesvg -type f -perm -u+x | head -n 1); \
	  "$$svg" $(DEMO_TRACE) $(DEMO_SVG); \
	  echo "SVG timeline of the work-stealing demo: $(DEMO_SVG) (open it in a browser)"; \
	else \
	  echo "(no goro_tracesvg in this build: open $(DEMO_TRACE) in ui.perfetto.dev)"; \
	fi
	./build/default/examples/webserver --demo 3 50

# Every example program, built and run as the test suite runs them.
examples: deps
	$(CMAKE) --preset default
	$(TOPLEVEL) $(CMAKE) --build --preset default -j $(JOBS) --target goro_examples
	$(CTEST) --test-dir build/default -L example --output-on-failure

# The client-library tests' servers and libraries (scripts/deps.sh clients)
# are optional: when they cannot be installed those tests skip.
deps-clients:
	@bash scripts/deps.sh clients || echo "make: the client-library tests' dependencies could not be installed: tests/clientlib_*_test.cpp skip"

test: deps deps-clients
	$(call test_preset,default)
	bash scripts/consumer.sh build/default

# Only the install + out-of-tree consumer step (after `make test` or `make build`).
consumer:
	bash scripts/consumer.sh build/default

# BENCH_ARGS is passed to bench/run.sh, e.g. BENCH_ARGS="--goro-only -n 5".
# A run of all workloads rewrites docs/benchmarks.md's generated section and
# docs/benchmarks.svg (--docs); 3 measured runs per cell unless -n says so.
# Without Go (and not root to install it) the report has no Go column.
BENCH_RUNS ?= 3
bench:
	@bash scripts/deps.sh base
	@bash scripts/deps.sh go || echo "make bench: no Go toolchain: the report runs without the Go column"
	$(CMAKE) --preset default
	@if [[ -f bench/run.sh ]]; then \
	  echo "bash bench/run.sh --docs $(BENCH_ARGS)"; \
	  $(TOPLEVEL) BUILD_DIR="$(CURDIR)/build/default" JOBS=$(JOBS) \
	    BENCH_RUNS=$(BENCH_RUNS) bash bench/run.sh --docs $(BENCH_ARGS); \
	else \
	  $(TOPLEVEL) $(CMAKE) --build --preset default -j $(JOBS) --target bench_run; \
	fi

asan: deps deps-clients
	$(call test_preset,$@)

tsan debug o3: deps
	$(call test_preset,$@)

# The -O0 build of the runtime's core: scheduler, channels, select, sync,
# timers, stacks, system calls, the poller (assertions and lock ranks on).
DEBUG_CORE_TESTS := sched_test runq_test newproc_test chan_test select_test \
  sema_test sync_test time_test context_test deadlock_test stackshrink_test \
  syscall_test blockedsyscall_test lockthread_test fd_test interpose_test \
  preempt_default_test
empty :=
space := $(empty) $(empty)
debug-core: deps
	$(CMAKE) --preset debug
	$(TOPLEVEL) $(CMAKE) --build --preset debug -j $(JOBS) --target $(DEBUG_CORE_TESTS)
	$(CTEST) --preset debug -j $(JOBS) --output-on-failure \
	  -L '^($(subst $(space),|,$(DEBUG_CORE_TESTS)))$$'

clang clang-o3:
	@bash scripts/deps.sh base clang
	$(call test_preset,$@)

format:
	@bash scripts/deps.sh format
	$(CLANG_FORMAT) -i $(FORMAT_FILES)

format-check:
	@bash scripts/deps.sh format
	$(CLANG_FORMAT) --dry-run --Werror $(FORMAT_FILES)

install: deps
	$(call build_preset,default,goro_installables)
	$(CMAKE) --install build/default --prefix "$(PREFIX)"

clean:
	rm -rf build
