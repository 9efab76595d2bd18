// bench_util.cpp: the goro-independent half of the benchmark framework
// (registry, RESULT/CHECK lines, leaf work, memory readings), shared by
// goro_bench (bench_main.cpp) and boost_bench (bench/boost/), so that every
// binary prints exactly the same protocol. See bench.hpp.
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "bench.hpp"

namespace gorobench {

std::vector<workload>& registry() {
  static std::vector<workload> r;
  return r;
}

registrar::registrar(const char* name, const char* description,
                     const char* aliases, void (*fn)()) {
  registry().push_back(workload{name, description, aliases, fn});
}

void result(std::string_view metric, double value, std::string_view unit) {
  std::printf("RESULT %.*s %.6g %.*s\n", static_cast<int>(metric.size()),
              metric.data(), value, static_cast<int>(unit.size()), unit.data());
  std::fflush(stdout);
}

void check(std::string_view name, std::uint64_t value) {
  std::printf("CHECK %.*s %llu\n", static_cast<int>(name.size()), name.data(),
              static_cast<unsigned long long>(value));
  std::fflush(stdout);
}

void note(std::string_view text) {
  std::printf("# %.*s\n", static_cast<int>(text.size()), text.data());
  std::fflush(stdout);
}

__attribute__((noinline)) std::uint64_t leaf_work(std::uint64_t iters,
                                                  std::uint64_t seed) {
  std::uint64_t x = seed;
  for (std::uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

std::uint64_t rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  unsigned long long size = 0, resident = 0;
  int n = std::fscanf(f, "%llu %llu", &size, &resident);
  std::fclose(f);
  if (n != 2) return 0;
  return resident * static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
}

namespace {

// Fields of /proc/self/status in KiB (0 where absent).
struct status_kib {
  unsigned long long hwm = 0, pte = 0;
};

status_kib read_status() {
  status_kib st;
  if (std::FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f)) {
      std::sscanf(line, "VmHWM: %llu kB", &st.hwm);
      std::sscanf(line, "VmPTE: %llu kB", &st.pte);
    }
    std::fclose(f);
  }
  return st;
}

}  // namespace

std::uint64_t page_table_bytes() { return read_status().pte * 1024; }

void report_memory(std::string_view workload) {
  // VmHWM (peak RSS) and VmPTE (page tables, not part of RSS) from
  // /proc/self/status, read at the end of the workload; minor faults from
  // getrusage. The Go twin prints the same three (bench/go/main.go);
  // bench_report shows them as memory columns beside the workload's times.
  const status_kib st = read_status();
  struct rusage ru {};
  ::getrusage(RUSAGE_SELF, &ru);
  // Whole numbers, printed exactly (result's %.6g would round them).
  const auto whole = [&](const char* suffix, unsigned long long v,
                         const char* unit) {
    std::printf("RESULT %.*s%s %llu %s\n", static_cast<int>(workload.size()),
                workload.data(), suffix, v, unit);
  };
  whole(".peak_rss", st.hwm, "KiB");
  whole(".page_tables", st.pte, "KiB");
  whole(".minflt", static_cast<unsigned long long>(ru.ru_minflt), "faults");
  std::fflush(stdout);
}

int env_gomaxprocs() {
  const char* s = std::getenv("GOMAXPROCS");
  if (s == nullptr || *s == '\0') return 0;
  char* end = nullptr;
  errno = 0;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v <= 0 || v > 1024) return 0;
  return static_cast<int>(v);
}

namespace {

bool matches(const workload& w, std::string_view name) {
  if (name == w.name) return true;
  std::string_view a = w.aliases;
  while (!a.empty()) {
    std::size_t sp = a.find(' ');
    std::string_view tok = a.substr(0, sp);
    if (tok == name) return true;
    if (sp == std::string_view::npos) break;
    a.remove_prefix(sp + 1);
  }
  return false;
}

void usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s <workload> | --list | --help\nworkloads:\n",
               argv0);
  for (const auto& w : registry())
    std::fprintf(stderr, "  %-16s %s\n", w.name, w.description);
  std::fprintf(stderr,
               "GOMAXPROCS from the environment sets the number of Ps.\n");
}

}  // namespace

const workload* parse_command_line(int argc, char** argv, int* exit_code) {
  *exit_code = 0;
  if (argc != 2) {
    usage(argv[0]);
    *exit_code = 2;
    return nullptr;
  }
  std::string_view arg = argv[1];
  if (arg == "--list") {
    for (const auto& w : registry()) std::printf("%s\n", w.name);
    return nullptr;
  }
  if (arg == "--help" || arg == "-h") {
    usage(argv[0]);
    return nullptr;
  }
  const workload* wl = nullptr;
  for (const auto& w : registry())
    if (matches(w, arg)) wl = &w;
  if (wl == nullptr) {
    std::fprintf(stderr, "unknown workload: %s\n", argv[1]);
    usage(argv[0]);
    *exit_code = 2;
  }
  return wl;
}

}  // namespace gorobench
