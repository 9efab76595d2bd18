// lock_os_thread.cpp: goro::lock_os_thread for thread-bound state (the
// seed's OpenGL-context / per-thread attribute use case and its "forgot to
// unlock" pitfall).
//
//   lock_os_thread [switches]
//
// A C library that keeps its state per thread (an OpenGL context, a
// thread's namespace, errno-style globals) only works if every call comes
// from the thread that set it up. A goroutine can move to another thread
// at every scheduling point; lock_os_thread() wires it to its current
// thread until unlock_os_thread() (and keeps other goroutines off that
// thread). Here:
//
// 1. An unlocked goroutine makes `switches` blocking calls while other
//    goroutines keep the Ps busy: it usually comes back on a different
//    thread (count shown, not checked: it depends on which thread is free).
// 2. A locked goroutine initialises a thread_local "context", sleeps,
//    yields and makes blocking calls `switches` times, and finds the same
//    thread and the same context every time.
// 3. A goroutine that exits while locked takes its thread with it (Go does
//    the same): the number of OS threads goes down.
//
// Exits 1 if the locked goroutine ever changed thread.
#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>

namespace {

using namespace std::chrono_literals;

// A C library's per-thread state, e.g. the current OpenGL context.
thread_local int current_context = 0;

void init_context(int id) { current_context = id; }

// The kernel's id of the calling thread. Not pthread_self(): glibc
// declares it __attribute__((const)), so the compiler may call it once and
// reuse the value across a scheduling point, after which the goroutine may
// be on another thread (see docs/porting.md).
long thread_id() { return syscall(SYS_gettid); }

int os_threads() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "Threads:", 8) == 0) n = std::atoi(line + 8);
  std::fclose(f);
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  const int switches = argc > 1 ? std::atoi(argv[1]) : 100;
  if (switches < 1) {
    std::fprintf(stderr, "usage: lock_os_thread [switches >= 1]\n");
    return 2;
  }
  return goro::run([switches]() -> int {
    int rc = 0;
    // Busy goroutines on the other Ps, so that threads are really shared.
    std::atomic<bool> stop{false};
    goro::wait_group busy;
    for (int i = 0; i < 2 * goro::gomaxprocs(); i++) {
      busy.add(1);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) goro::gosched();
        busy.done();
      });
    }

    std::printf("=== 1. Unlocked ===\n");
    {
      goro::wait_group wg;
      int moves = 0;
      wg.add(1);
      goro::go([&] {
        long last = thread_id();
        for (int i = 0; i < switches; i++) {
          // A blocking call hands the P to another thread; on return the
          // goroutine runs wherever a P is free.
          goro::blocking_long([] { ::usleep(1000); });
          if (last != thread_id()) moves++;
          last = thread_id();
        }
        wg.done();
      });
      wg.wait();
      std::printf("woke up on another thread %d times out of %d\n", moves,
                  switches);
    }

    std::printf("\n=== 2. Locked to its thread ===\n");
    {
      goro::wait_group wg;
      int moves = 0, lost_context = 0;
      wg.add(1);
      goro::go([&] {
        goro::lock_os_thread();
        init_context(7);  // must stay on this thread
        const long mine = thread_id();
        for (int i = 0; i < switches; i++) {
          if (i % 3 == 0)
            goro::sleep(50us);
          else if (i % 3 == 1)
            goro::gosched();
          else
            goro::blocking_long([] { ::usleep(50); });
          if (mine != thread_id()) moves++;
          if (current_context != 7) lost_context++;
        }
        goro::unlock_os_thread();  // Go: defer runtime.UnlockOSThread()
        wg.done();
      });
      wg.wait();
      std::printf(
          "changed thread %d times, lost its thread_local context %d times\n",
          moves, lost_context);
      if (moves != 0 || lost_context != 0) {
        std::printf("FAIL: a locked goroutine moved\n");
        rc = 1;
      }
    }

    std::printf("\n=== 3. Exiting while locked ===\n");
    {
      const int before = os_threads();
      auto done = goro::make_chan<void>();
      goro::go([done] {
        goro::lock_os_thread();  // and never unlocked
        done.close();
      });
      done.recv();
      int after = os_threads();
      for (int i = 0; i < 2000 && after >= before; i++) {
        goro::sleep(1ms);
        after = os_threads();
      }
      std::printf(
          "OS threads: %d before, %d after the locked goroutine "
          "exited (its thread ended with it)\n",
          before, after);
    }
    stop = true;
    busy.wait();
    if (rc == 0) std::printf("lock_os_thread: ok\n");
    return rc;
  });
}
