// cpu.cpp: how many CPUs this process may use (affinity mask and cgroup
// CPU bandwidth limit) and the default GOMAXPROCS derived from it.
#include <sched.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "runtime/proc.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {

int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  long n = sysconf(_SC_NPROCESSORS_ONLN);
  return n > 0 ? int(n) : 1;
}

// The tightest cgroup CPU bandwidth limit (quota / period, in CPUs) on the
// path from this process's cgroup to the root; <= 0 when unlimited.
double cgroup_cpu_limit() {
  double limit = 0;
  std::ifstream cg("/proc/self/cgroup");
  std::string line;
  while (std::getline(cg, line)) {
    if (line.rfind("0::", 0) == 0) {  // cgroup v2
      std::string path = line.substr(3);
      for (;;) {
        std::ifstream f("/sys/fs/cgroup" + path + "/cpu.max");
        std::string quota;
        double period = 0;
        if (f >> quota >> period && quota != "max" && period > 0) {
          double l = std::stod(quota) / period;
          if (limit <= 0 || l < limit) limit = l;
        }
        if (path.empty() || path == "/") break;
        std::size_t slash = path.rfind('/');
        path = slash == 0 || slash == std::string::npos ? "/"
                                                        : path.substr(0, slash);
        if (path == "/") path.clear();
      }
    } else if (line.find(":cpu,") != std::string::npos ||
               line.find(":cpu:") != std::string::npos ||
               line.find(",cpu:") != std::string::npos) {  // cgroup v1
      for (const char* dir :
           {"/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"}) {
        std::ifstream q(std::string(dir) + "/cpu.cfs_quota_us");
        std::ifstream p(std::string(dir) + "/cpu.cfs_period_us");
        double quota = 0, period = 0;
        if (q >> quota && p >> period && quota > 0 && period > 0) {
          double l = quota / period;
          if (limit <= 0 || l < limit) limit = l;
          break;
        }
      }
    }
  }
  return limit;
}

}  // namespace

int usable_cpus() {
  int n = affinity_cpus();
  double limit = cgroup_cpu_limit();
  if (limit > 0) {
    int l = int(std::ceil(limit));
    if (l < n) n = l;
  }
  return n < 1 ? 1 : n;
}

int usable_cpus_cached() {
  static const int n = usable_cpus();
  return n;
}

int default_gomaxprocs() {
  // As Go 1.25: the logical CPUs under the affinity mask, lowered to the
  // cgroup CPU limit rounded up, but never below 2 because of a limit (a
  // fractional limit still deserves some parallelism).
  int n = affinity_cpus();
  double limit = cgroup_cpu_limit();
  if (limit > 0) {
    int l = int(std::ceil(limit));
    if (l < 2) l = 2;
    if (l < n) n = l;
  }
  return n < 1 ? 1 : n;
}

}  // namespace goro::rt
