// gomaxprocs_container.cpp: what GOMAXPROCS means, and where its default
// comes from inside a container (the seeds' NumCPU / GOMAXPROCS /
// "wrong GOMAXPROCS in containers" sections).
//
//   gomaxprocs_container
//
// Prints the CPUs the kernel lets this process use (the affinity mask),
// the cgroup v2 CPU limit (cpu.max), goro::num_cpu() (the affinity count
// lowered to the cgroup limit, rounded up: goro reads the limit itself, no
// automaxprocs library needed) and goro::gomaxprocs(), the number of Ps.
// Then it changes gomaxprocs at run time (a stop-the-world resize, as
// runtime.GOMAXPROCS(n)) and shows that Ms (threads) are not capped by
// it: goroutines in blocking calls hold threads of their own.
//
// Try: GOMAXPROCS=1 gomaxprocs_container, taskset -c 0 gomaxprocs_container,
// or in a container with --cpus=1.5.
//
// Exits 1 if gomaxprocs(n) does not behave as runtime.GOMAXPROCS(n).
#include <sched.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <goro/goro.hpp>
#include <string>

namespace {

int os_threads() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("Threads:", 0) == 0) return std::atoi(line.c_str() + 8);
  return -1;
}

// cgroup v2: "max 100000" (no limit) or "150000 100000" (1.5 CPUs).
std::string cgroup_cpu_max() {
  std::ifstream cg("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(cg, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  std::ifstream f("/sys/fs/cgroup" + path + "/cpu.max");
  std::string v;
  if (!std::getline(f, v)) return "(no cgroup v2 cpu.max)";
  return v;
}

}  // namespace

int main() {
  return goro::run([]() -> int {
    int rc = 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    sched_getaffinity(0, sizeof set, &set);
    std::printf("online CPUs (sysconf):    %ld\n",
                sysconf(_SC_NPROCESSORS_ONLN));
    std::printf("affinity mask:            %d CPUs\n", CPU_COUNT(&set));
    std::printf("cgroup cpu.max:           %s\n", cgroup_cpu_max().c_str());
    std::printf("goro::num_cpu():          %d\n", goro::num_cpu());
    const char* env = std::getenv("GOMAXPROCS");
    std::printf("GOMAXPROCS environment:   %s\n", env ? env : "(unset)");
    const int initial = goro::gomaxprocs();  // 0 (the default) only queries
    std::printf("goro::gomaxprocs():       %d Ps\n", initial);
    if (env != nullptr && std::atoi(env) > 0 && std::atoi(env) != initial) {
      std::printf("FAIL: GOMAXPROCS=%s not applied\n", env);
      rc = 1;
    }

    // Set to a new value: returns the old one, as runtime.GOMAXPROCS(2).
    const int old = goro::gomaxprocs(2);
    std::printf("\ngomaxprocs(2) returned %d; now %d Ps\n", old,
                goro::gomaxprocs());
    if (old != initial || goro::gomaxprocs() != 2) rc = 1;

    // Changing GOMAXPROCS changes the number of Ps, not of Ms: 8 goroutines
    // in blocking calls each hold a thread while 2 Ps keep running others.
    const int threads_before = os_threads();
    int pipe_fds[2];
    if (pipe(pipe_fds) != 0) return 1;
    goro::wait_group wg;
    for (int i = 0; i < 8; i++) {
      wg.add(1);
      goro::go([&] {
        char byte;
        // A system call that blocks its thread (a pipe read, as a file
        // read or a C library call would): the P is handed to another
        // thread at once, the blocked thread keeps the goroutine.
        goro::blocking_long([&] { return read(pipe_fds[0], &byte, 1); });
        wg.done();
      });
    }
    // Bounded wait until the 8 threads are blocked in read(): with the
    // main thread and sysmon, at least 10 threads, more than the 2 Ps.
    int threads_during = 0;
    for (int i = 0; i < 5000 && (threads_during = os_threads()) < 10; i++)
      goro::sleep(std::chrono::milliseconds(1));
    if (write(pipe_fds[1], "xxxxxxxx", 8) != 8) return 1;
    wg.wait();
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    std::printf(
        "8 goroutines in blocking calls: %d OS threads (%d before) for %d "
        "Ps\n",
        threads_during, threads_before, goro::gomaxprocs());
    if (threads_during < 10) {
      std::printf("FAIL: fewer threads than blocking calls\n");
      rc = 1;
    }

    goro::gomaxprocs(initial);
    std::printf("back to %d Ps\n", goro::gomaxprocs());
    if (rc == 0) std::printf("gomaxprocs_container: ok\n");
    return rc;
  });
}
