// schedtrace_demo.cpp: watching the scheduler with GORO_DEBUG=schedtrace
// (Go's GODEBUG=schedtrace), plus goexit and gosched (the GopherCon talk's
// "let's run some code").
//
//   schedtrace_demo [phase_ms] [burst]
//
// Unless GORO_DEBUG is already set, the program sets
// GORO_DEBUG=schedtrace=50 before the runtime starts, so the runtime
// prints a SCHED line on stderr every 50 ms:
//
//   SCHED 100ms: gomaxprocs=2 idleprocs=0 threads=5 spinningthreads=0
//     needspinning=0 idlethreads=1 runqueue=812 [97 120]
//
// gomaxprocs: Ps; idleprocs: Ps with nothing to run; threads: Ms;
// spinningthreads: Ms looking for work (stealing); idlethreads: Ms parked;
// runqueue: goroutines in the global run queue; [a b]: each P's local run
// queue. Add scheddetail=1 for a line per P, M and G.
//
// The phases, `phase_ms` each (150 by default), announced on stderr so they
// interleave with the trace:
//   idle      main sleeps: every P idle, the threads parked
//   burst     main spawns `burst` (20,000) short CPU-bound goroutines from one
//   P: its
//             local queue fills (256), half goes to the global queue, the
//             other P steals
//   syscalls  8 goroutines sit in blocking calls: threads grows, the Ps
//             stay free for other goroutines
//   gosched   two goroutines take turns with gosched() on the Ps
// and finally a goroutine that calls goexit() deep inside a call chain:
// its destructors run, the goroutine ends, the caller is not returned to.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

void phase(const char* name, const char* what) {
  std::fprintf(stderr, "--- phase %s: %s\n", name, what);
}

std::uint64_t spin(std::uint64_t x, int n) {
  for (int i = 0; i < n; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

struct announce_on_exit {
  std::atomic<int>& count;
  ~announce_on_exit() {
    count++;
    std::fprintf(stderr, "    (destructor ran while goexit unwound)\n");
  }
};

// Three calls deep, each with an object to destroy (a loop rather than
// recursion: g++ 12 misreads a noreturn call in a recursive function as
// infinite recursion).
__attribute__((noinline)) void innermost(std::atomic<int>& unwound) {
  announce_on_exit guard{unwound};
  goro::goexit();  // ends the goroutine, runs destructors
}
__attribute__((noinline)) void middle(std::atomic<int>& unwound) {
  announce_on_exit guard{unwound};
  innermost(unwound);
}
__attribute__((noinline)) void outer(std::atomic<int>& unwound) {
  announce_on_exit guard{unwound};
  middle(unwound);
}

}  // namespace

int main(int argc, char** argv) {
  const int phase_ms = argc > 1 ? std::atoi(argv[1]) : 150;
  const int burst = argc > 2 ? std::atoi(argv[2]) : 20'000;
  if (phase_ms < 1 || burst < 1) {
    std::fprintf(stderr,
                 "usage: schedtrace_demo [phase_ms >= 1] [burst >= 1]\n");
    return 2;
  }
  // Read once, when the runtime starts: set it before goro::run.
  setenv("GORO_DEBUG", "schedtrace=50", 0);
  std::fprintf(stderr, "GORO_DEBUG=%s\n", std::getenv("GORO_DEBUG"));
  const auto d = std::chrono::milliseconds(phase_ms);

  return goro::run([&]() -> int {
    phase("idle", "main sleeps; idleprocs = gomaxprocs - 1 or gomaxprocs");
    goro::sleep(d);

    phase("burst", "CPU-bound goroutines spawned from one P");
    {
      std::atomic<std::uint64_t> sink{0};
      goro::wait_group wg;
      const auto end = clock_type::now() + d;
      int spawned = 0;
      // Keep the queues full for the whole phase.
      while (spawned < burst && clock_type::now() < end) {
        wg.add(1);
        goro::go([&sink, &wg, spawned] {
          sink += spin(std::uint64_t(spawned), 20'000);
          wg.done();
        });
        ++spawned;
      }
      wg.wait();
      std::fprintf(stderr, "    %d goroutines ran\n", spawned);
    }

    phase("syscalls", "8 goroutines blocked in usleep() inside blocking_long");
    {
      goro::wait_group wg;
      for (int i = 0; i < 8; i++) {
        wg.add(1);
        goro::go([&] {
          goro::blocking_long(
              [&] { ::usleep(static_cast<useconds_t>(phase_ms) * 1000); });
          wg.done();
        });
      }
      wg.wait();
    }

    phase("gosched", "two goroutines yielding to each other");
    {
      std::atomic<std::int64_t> turns{0};
      goro::wait_group wg;
      const auto end = clock_type::now() + d;
      for (int i = 0; i < 2; i++) {
        wg.add(1);
        goro::go([&] {
          while (clock_type::now() < end) {
            turns++;
            goro::gosched();  // back to the run queue, let another run
          }
          wg.done();
        });
      }
      wg.wait();
      std::fprintf(stderr, "    %lld gosched() calls\n",
                   (long long)turns.load());
    }

    phase("goexit", "a goroutine ends itself from 3 calls deep");
    std::atomic<int> unwound{0};
    std::atomic<bool> returned{false};
    auto done = goro::make_chan<void>();
    goro::go([&, done] {
      struct close_on_exit {
        goro::chan<void> c;
        ~close_on_exit() { c.close(); }
      } closer{done};
      outer(unwound);
      returned = true;  // never reached
    });
    done.recv();
    if (unwound != 3 || returned) {
      std::printf("FAIL: goexit did not unwind as expected\n");
      return 1;
    }
    std::printf("schedtrace_demo: ok\n");
    return 0;
  });
}
