// bench.hpp: the small framework shared by goro's side-by-side benchmarks.
//
// Every workload has a twin with the same name in bench/go (Go 1.19, standard
// library only). A benchmark binary runs ONE workload per process:
//
//     goro_bench <workload>      # GOMAXPROCS from the environment
//     goro_bench --list          # names, one per line
//
// and prints machine-readable lines that bench/run.sh collects:
//
//     RESULT <metric> <value> <unit>    lower is better for every metric
//     CHECK  <workload> <value>         a checksum both languages must agree on
//
// Lines starting with '#' are informational. A workload may print several
// RESULT lines (e.g. `parked` prints parked_rss and parked_create).
//
// To add workloads, write a .cpp file with GOROBENCH_WORKLOAD(...) blocks and
// add it to goro_bench's sources in bench/CMakeLists.txt; add the Go twin to
// bench/go with register(...) in an init function.
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>
#include <vector>

namespace gorobench {

struct workload {
  const char* name;
  const char* description;
  // Extra names accepted on the command line (space-separated), e.g. the
  // metric names a workload reports; may be "".
  const char* aliases;
  void (*fn)();
};

std::vector<workload>& registry();

struct registrar {
  registrar(const char* name, const char* description, const char* aliases,
            void (*fn)());
};

// Prints "RESULT <metric> <value> <unit>".
void result(std::string_view metric, double value, std::string_view unit);
// Prints "CHECK <workload> <value>".
void check(std::string_view workload, std::uint64_t value);
// Prints "# <text>" (informational).
void note(std::string_view text);

// The opaque leaf CPU work, identical to leafWork in bench/go/main.go: an LCG
// step per iteration behind a compiler barrier, not inlined, so no compiler
// can fold or vectorise it. About 4 cycles per iteration (imul + add chain).
std::uint64_t leaf_work(std::uint64_t iters, std::uint64_t seed);

// Resident set size of this process in bytes (/proc/self/statm).
std::uint64_t rss_bytes();

// Size of this process's page tables in bytes now (VmPTE in
// /proc/self/status; page tables are not part of RSS).
std::uint64_t page_table_bytes();

// Prints RESULT <workload>.peak_rss (VmHWM, KiB), <workload>.page_tables
// (VmPTE at the end, KiB) and <workload>.minflt (minor page faults of the
// whole run); bench_main calls it after every workload.
void report_memory(std::string_view workload);

// Busy-waits for `d` (with cooperative preemption points), like Go's doWork.
// Defined by each binary's main file (goro: goro::preempt_point()).
void spin_for(std::chrono::nanoseconds d);

// The GOMAXPROCS environment variable, or 0 when unset or invalid.
int env_gomaxprocs();

// Handles `<binary> <workload> | --list | --help`: returns the workload to
// run, or nullptr when the program should exit with *exit_code (after
// --list, --help, a usage error or an unknown workload).
const workload* parse_command_line(int argc, char** argv, int* exit_code);

using clock = std::chrono::steady_clock;

inline double ns_since(clock::time_point t0) {
  return std::chrono::duration<double, std::nano>(clock::now() - t0).count();
}

}  // namespace gorobench

#define GOROBENCH_CONCAT2(a, b) a##b
#define GOROBENCH_CONCAT(a, b) GOROBENCH_CONCAT2(a, b)

// GOROBENCH_WORKLOAD(name, "description", "aliases") { body }
#define GOROBENCH_WORKLOAD(name, description, aliases)                        \
  static void GOROBENCH_CONCAT(gorobench_fn_, name)();                        \
  static const ::gorobench::registrar GOROBENCH_CONCAT(gorobench_reg_, name){ \
      #name, description, aliases, &GOROBENCH_CONCAT(gorobench_fn_, name)};   \
  static void GOROBENCH_CONCAT(gorobench_fn_, name)()
