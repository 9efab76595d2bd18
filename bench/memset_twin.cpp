// memset_twin.cpp: libc code under preemption requests (issue 23 item 4).
//
//   goro_memset_twin thread|goroutine [K]
//
// K (default 40) rounds of std::memset over a 64 MB buffer followed by
// std::memcpy of it into a second 64 MB buffer. `thread`: a plain
// std::thread runs the rounds. `goroutine`: goro::run at gomaxprocs 1, one
// goroutine runs them while a second goroutine stays runnable on the same P
// (it loops on goro::gosched() until the first is done), so sysmon asks the
// first to yield every time slice; libc's code cannot be interrupted, and
// the request must be repeated at most about once a slice (Go's back-off),
// not on every sysmon round. Both buffers are touched before the timed part
// in both modes. One line on stdout: mode, wall ms of the rounds and the
// CPU ms of the thread that ran them, for a
// goroutine the signals the runtime sent to its thread during them (and per
// second, with the breakdown), and the process's peak RSS and minor page faults
// (getrusage).
#include <sys/resource.h>
#include <time.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <goro/wait_group.hpp>
#include <memory>
#include <thread>

namespace {

constexpr std::size_t kBytes = std::size_t{64} << 20;

// Keeps the compiler from dropping stores to `p` it thinks nobody reads.
inline void escape(const void* p) { asm volatile("" : : "r"(p) : "memory"); }

std::int64_t thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return std::int64_t{ts.tv_sec} * 1000000000 + ts.tv_nsec;
}

// The timed rounds; returns wall nanoseconds, and in *cpu the CPU time of
// the thread that ran them (the goroutine is not preempted in libc, and a
// preempted one resumes on its own thread), which a loaded machine's
// descheduling does not inflate as it does the wall time.
std::int64_t rounds(char* a, char* b, int k, std::int64_t* cpu) {
  const std::int64_t c0 = thread_cpu_ns();
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < k; ++i) {
    std::memset(a, i & 0xff, kBytes);
    escape(a);
    std::memcpy(b, a, kBytes);
    escape(b);
  }
  auto t1 = std::chrono::steady_clock::now();
  *cpu = thread_cpu_ns() - c0;
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || (std::strcmp(argv[1], "thread") != 0 &&
                   std::strcmp(argv[1], "goroutine") != 0)) {
    std::fprintf(stderr, "usage: %s thread|goroutine [rounds]\n", argv[0]);
    return 2;
  }
  const bool as_goroutine = std::strcmp(argv[1], "goroutine") == 0;
  const int k = argc > 2 ? std::atoi(argv[2]) : 40;
  if (k < 1) {
    std::fprintf(stderr, "rounds must be >= 1\n");
    return 2;
  }

  std::unique_ptr<char[]> a(new char[kBytes]);
  std::unique_ptr<char[]> b(new char[kBytes]);
  std::memset(a.get(), 1, kBytes);  // page faults here, outside the timing
  std::memset(b.get(), 1, kBytes);
  escape(a.get());
  escape(b.get());

  std::int64_t ns = 0, cpu_ns = 0;
  goro::debug::preempt_stats before{}, after{};
  if (!as_goroutine) {
    std::thread t([&] { ns = rounds(a.get(), b.get(), k, &cpu_ns); });
    t.join();
  } else {
    goro::options opt;
    opt.gomaxprocs = 1;
    goro::run(opt, [&] {
      std::atomic<bool> done{false};
      std::atomic<bool> spinning{false};
      goro::wait_group wg;
      wg.add(2);
      goro::go([&] {
        spinning.store(true, std::memory_order_relaxed);
        while (!done.load(std::memory_order_relaxed)) goro::gosched();
        wg.done();
      });
      goro::go([&] {
        // Start once the other goroutine is in its loop, so it is runnable
        // on the P for the whole of the rounds.
        while (!spinning.load(std::memory_order_relaxed)) goro::gosched();
        before = goro::debug::read_preempt_stats();
        ns = rounds(a.get(), b.get(), k, &cpu_ns);
        after = goro::debug::read_preempt_stats();
        done.store(true, std::memory_order_relaxed);
        wg.done();
      });
      wg.wait();
    });
  }

  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  const double ms = static_cast<double>(ns) / 1e6;
  std::printf("mode=%s rounds=%d ms=%.1f cpu_ms=%.1f", argv[1], k, ms,
              static_cast<double>(cpu_ns) / 1e6);
  if (as_goroutine) {
    // signals_sent counts every tgkill of the runtime: preemption requests
    // and the blocked-thread probe's (blocked_signalled: the thread was
    // found off the CPUs for a whole GORO_DEBUG=blockedsyscall period,
    // e.g. descheduled on a loaded machine; a probe finding a signal still
    // pending sends none, so this bounds its share from above).
    const auto sent = after.signals_sent - before.signals_sent;
    std::printf(
        " signals=%llu signals_per_s=%.1f blocked_signalled=%llu "
        "rejected_pc=%llu preempted=%llu",
        static_cast<unsigned long long>(sent),
        static_cast<double>(sent) / (ms / 1e3),
        static_cast<unsigned long long>(after.blocked_signalled -
                                        before.blocked_signalled),
        static_cast<unsigned long long>(after.rejected_pc - before.rejected_pc),
        static_cast<unsigned long long>(after.preempted - before.preempted));
  }
  std::printf(" maxrss_kb=%ld minflt=%ld\n", ru.ru_maxrss, ru.ru_minflt);
  return 0;
}
