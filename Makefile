# goro — convenience front end over CMake presets (see CMakePresets.json).
#
#   make demo            build (Release) and run the tour (examples/demo.cpp),
#                        then the web server demo (examples/webserver.cpp
#                        --demo: 3 s of in-process load, requests/s and
#                        latency percentiles for light and heavy requests)
#   make build           deps check and Release build (preset default)
#   make test            deps check, Release build, ctest (the unit tests and
#                        doc_snippets_gcc/_clang, which compile and run the
#                        examples of README.md, docs/ and include/goro), then
#                        scripts/consumer.sh: installs into a temporary prefix
#                        (mktemp) and builds tests/consumer against it with
#                        find_package (shared, static) and pkg-config (goro,
#                        goro-static), running each binary with
#                        LD_LIBRARY_PATH unset
#   make consumer        only that install + consumer step (after make test)
#   make bench           build and run the side-by-side benchmarks against Go
#                        (bench/run.sh; BENCH_ARGS="--goro-only" etc.)
#   make asan | tsan | clang | debug | o3 | clang-o3
#                        build + test that preset (asan: ASan+UBSan; debug:
#                        assertions on, lock-rank checks)
#   make format | format-check    clang-format 14
#   make install PREFIX=/usr/local
#   make clean
#
# CI (.ci/run) runs make test, make asan, make tsan and make debug.
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

.PHONY: all deps build demo test consumer bench asan tsan clang debug o3 \
        clang-o3 format format-check install clean help

all: build

help:
	@sed -n '2,/^$$/p' Makefile | sed 's/^# \{0,1\}//'

deps:
	@bash scripts/deps.sh base

build: deps
	$(call build_preset,default)

demo: deps
	$(call build_preset,default,demo webserver)
	./build/default/examples/demo
	./build/default/examples/webserver --demo 3 50

test: deps
	$(call test_preset,default)
	bash scripts/consumer.sh build/default

# Only the install + out-of-tree consumer step (after `make test` or `make build`).
consumer:
	bash scripts/consumer.sh build/default

# BENCH_ARGS is passed to bench/run.sh, e.g. BENCH_ARGS="--goro-only -n 3".
bench:
	@bash scripts/deps.sh base go
	$(CMAKE) --preset default
	@if [[ -f bench/run.sh ]]; then \
	  echo "bash bench/run.sh $(BENCH_ARGS)"; \
	  $(TOPLEVEL) BUILD_DIR="$(CURDIR)/build/default" JOBS=$(JOBS) \
	    bash bench/run.sh $(BENCH_ARGS); \
	else \
	  $(TOPLEVEL) $(CMAKE) --build --preset default -j $(JOBS) --target bench_run; \
	fi

asan tsan debug o3: deps
	$(call test_preset,$@)

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
	$(call build_preset,default,goro_static goro_shared)
	$(CMAKE) --install build/default --prefix "$(PREFIX)"

clean:
	rm -rf build
