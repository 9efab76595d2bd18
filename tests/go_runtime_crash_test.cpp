// Ports of Go's runtime/crash_test.go that apply to a scheduler: the
// deadlock reports (simple, locked, after goexit), goexit running
// destructors, a nil function given to go, panics in main and while
// printing a panic, a runtime error (SIGSEGV) in a goroutine, thread
// exhaustion, and a program that used the poller and exits cleanly; each
// at GOMAXPROCS 1, 2 and 4, in a death-test child (Go runs a test
// program).
//
// Like deadlock_test.cpp this file does not include test_support.hpp: its
// watchdog is a thread the runtime does not know about, which could still
// act, so checkdead would (rightly) never report a deadlock. Children get
// a SIGALRM watchdog instead.
#include <gtest/gtest.h>

// goro::select() with no cases (Go's select {}) instantiates select.hpp's
// fold loops with nothing to fold, which GCC flags as set-but-unused.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-but-set-variable"
#include <goro/goro.hpp>
#pragma GCC diagnostic pop

#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>

#include "go_port_support.hpp"

// 1: skip the tests that show a finding not fixed yet (build with
// -DGORO_GO_FINDING_SKIPS=0 to run them).
#ifndef GORO_GO_FINDING_SKIPS
#define GORO_GO_FINDING_SKIPS 1
#endif
#define SKIP_FINDING(what)                                       \
  do {                                                           \
    if (GORO_GO_FINDING_SKIPS) GTEST_SKIP() << "FINDING: " what; \
  } while (0)

#if defined(__SANITIZE_THREAD__)
#define GORO_CRASH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORO_CRASH_TSAN 1
#endif
#endif
#ifndef GORO_CRASH_TSAN
#define GORO_CRASH_TSAN 0
#endif

namespace {

using namespace std::chrono_literals;
using ::testing::ExitedWithCode;

constexpr const char* kDeadlock =
    "fatal error: all goroutines are asleep - deadlock!";
constexpr const char* kGoexitDeadlock =
    "fatal error: no goroutines \\(main called goro::goexit\\) - deadlock!";

extern "C" void crash_child_watchdog(int) {
  static const char msg[] =
      "\n[watchdog] death-test child still running: exiting with status 3\n";
  ssize_t r = ::write(2, msg, sizeof msg - 1);
  (void)r;
  ::syscall(SYS_exit_group, 3);
}

class GoRuntimeCrash : public ::testing::TestWithParam<int> {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (::testing::internal::InDeathTestChild()) {
      struct sigaction sa = {};
      sa.sa_handler = crash_child_watchdog;
      sigaction(SIGALRM, &sa, nullptr);
      alarm(GORO_CRASH_TSAN ? 60 : 20);
    }
  }
  goro::options opts() const {
    goro::options o;
    o.gomaxprocs = GetParam();
    return o;
  }
};

INSTANTIATE_TEST_SUITE_P(Procs, GoRuntimeCrash, GO_PORT_PROCS,
                         [](const ::testing::TestParamInfo<int>& i) {
                           return "gomaxprocs" + std::to_string(i.param);
                         });

// Ends a child: 0 when ok, else 1 after printing why.
[[noreturn]] void child_exit(bool ok, const std::string& why = "") {
  if (!ok) std::fprintf(stderr, "child check failed: %s\n", why.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(ok ? 0 : 1);
}

void block_forever() {
  auto c = goro::make_chan<int>();
  c.recv();
}

// An exception whose message is computed by code that yields (Go's
// errorThatGosched) or makes a system call (Go's SyscallInPanic) while the
// panic is being printed.
struct error_that_gosched : std::exception {
  const char* what() const noexcept override {
    goro::gosched();
    return "errorThatGosched";
  }
};
struct error_with_syscall : std::exception {
  const char* what() const noexcept override {
    goro::blocking([] { return ::getppid(); });
    return "SyscallInPanic";
  }
};

// Counts "goroutine N [" headers in a dump; *only_one_is_1 when the only
// one is goroutine 1.
int goroutine_headers(const std::string& dump, bool* first_is_1) {
  int n = 0;
  *first_is_1 = false;
  for (std::size_t at = 0;
       (at = dump.find("goroutine ", at)) != std::string::npos; at++) {
    if (at != 0 && dump[at - 1] != '\n') continue;
    std::size_t sp = dump.find(' ', at + 10);
    if (sp == std::string::npos || dump.compare(sp, 2, " [") != 0) continue;
    if (n == 0) *first_is_1 = dump.compare(at, 12, "goroutine 1 ") == 0;
    n++;
  }
  return n;
}

}  // namespace

// Go: TestSimpleDeadlock. main blocks forever on a channel.
TEST_P(GoRuntimeCrash, SimpleDeadlock) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] { block_forever(); });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Go: TestLockedDeadlock. main, wired to its thread, blocks forever.
TEST_P(GoRuntimeCrash, LockedDeadlock) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          goro::lock_os_thread();
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Go: TestLockedDeadlock2. A locked goroutine blocks forever, then main
// does too.
TEST_P(GoRuntimeCrash, LockedDeadlock2) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          auto started = goro::make_chan<bool>(1);
          goro::go([started] {
            goro::lock_os_thread();
            started.send(true);
            block_forever();
          });
          started.recv();
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Go: TestGoexitDeadlock. main calls goexit while two short goroutines
// finish: no goroutines are left.
TEST_P(GoRuntimeCrash, GoexitDeadlock) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          auto f = [] {
            volatile int x = 0;
            for (int i = 0; i < 10; i++) x = x + i;
          };
          goro::go(f);
          goro::go(f);
          goro::goexit();
        });
        child_exit(false, "run() returned after goexit");
      },
      ExitedWithCode(2), kGoexitDeadlock);
}

// Go: TestGoexitCrash (testprog GoexitExit). main calls goexit while a
// goroutine sleeps 1 ms: the report comes once that one is done.
TEST_P(GoRuntimeCrash, GoexitCrash) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          goro::go([] { goro::sleep(1ms); });
          goro::goexit();
        });
        child_exit(false, "run() returned after goexit");
      },
      ExitedWithCode(2), kGoexitDeadlock);
}

// Go: TestGoexitDefer. goexit runs the goroutine's deferred calls (here
// destructors) and is not a panic that a recover (catch) would see.
TEST_P(GoRuntimeCrash, GoexitDefer) {
  EXPECT_EXIT(
      {
        bool ok = false;
        goro::run(opts(), [&ok] {
          auto c = goro::make_chan<bool>(1);
          std::atomic<bool> caught_exception{false};
          goro::go([c, &caught_exception] {
            struct deferred {
              goro::chan<bool> c;
              ~deferred() { c.send(true); }
            } d{c};
            try {
              goro::goexit();
            } catch (const std::exception&) {
              caught_exception = true;  // goexit is no std::exception
            }
          });
          ok = *c.recv() && !caught_exception.load();
        });
        child_exit(ok, "goexit did not run the destructor or was caught");
      },
      ExitedWithCode(0), "");
}

// Go: TestGoNil. `go f()` with a nil f panics in the caller (recoverable),
// not in the new goroutine; after recovering, main blocks: a deadlock.
TEST_P(GoRuntimeCrash, GoNil) {
  // Was a finding: goro::go accepted the empty function and the new
  // goroutine died with "panic: bad_function_call". It now throws
  // std::invalid_argument("go of nil func value") in the caller.
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          try {
            goro::go(std::function<void()>{});
          } catch (...) {
          }
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Go: TestMainGoroutineID. A panic in main names goroutine 1.
TEST_P(GoRuntimeCrash, MainGoroutineID) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] { throw std::runtime_error("test"); });
        child_exit(false, "run() returned after main panicked");
      },
      ExitedWithCode(2), "panic: test\n\ngoroutine 1 \\[running\\]:");
}

// Go: TestNoHelperGoroutines. The runtime runs no goroutines of its own: a
// full dump from a main with nothing else running lists only goroutine 1.
TEST_P(GoRuntimeCrash, NoHelperGoroutines) {
  EXPECT_EXIT(
      {
        std::string dump;
        goro::run(opts(), [&dump] {
          goro::sleep(1ms);  // timers and the poller in use
          dump = goro::debug::stack(true);
        });
        bool first_is_1 = false;
        int n = goroutine_headers(dump, &first_is_1);
        child_exit(n == 1 && first_is_1, "want only goroutine 1:\n" + dump);
      },
      ExitedWithCode(0), "");
}

// Go: TestPanicDeadlockGosched. The panic value's message yields while it
// is printed: the panic is still reported.
TEST_P(GoRuntimeCrash, PanicDeadlockGosched) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] { throw error_that_gosched(); });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), "panic: errorThatGosched\n");
}

// Go: TestPanicDeadlockSyscall. The panic value's message makes a
// (blocking) system call while it is printed.
TEST_P(GoRuntimeCrash, PanicDeadlockSyscall) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] { throw error_with_syscall(); });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), "panic: SyscallInPanic\n");
}

// Go: TestRuntimePanic / TestRuntimePanicWithRuntimeError. A nil pointer
// dereference in a goroutine is Go's runtime error: "panic: runtime error:
// invalid memory address or nil pointer dereference", "[signal SIGSEGV",
// exit status 2. (A load: on some sandboxed kernels a store to page 0
// does not fault.)
TEST_P(GoRuntimeCrash, RuntimePanic) {
  SKIP_FINDING(
      "a SIGSEGV that is not a stack overflow goes to the default action: "
      "the process dies by signal 11 with no message; Go prints 'panic: "
      "runtime error: invalid memory address or nil pointer dereference', "
      "'[signal SIGSEGV ...]' and the goroutine's trace, and exits 2");
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          auto done = goro::make_chan<bool>();
          goro::go([done] {
            int* volatile p = nullptr;
            int v = *p;
            done.send(v == 0);
          });
          done.recv();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), "SIGSEGV");
}

// Go: TestThreadExhaustion. More locked, blocked goroutines than the
// thread limit allows is the fatal error "thread exhaustion".
TEST_P(GoRuntimeCrash, ThreadExhaustion) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          goro::set_max_threads(20);
          for (int i = 0; i < 40; i++)
            goro::go([] {
              goro::lock_os_thread();
              goro::blocking_long([] { return ::pause(); });
            });
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), "thread exhaustion");
}

// Go: TestNetpollDeadlock. A program that used the network poller (a
// refused dial) and then returns normally exits 0, without a deadlock
// report.
TEST_P(GoRuntimeCrash, NetpollDeadlock) {
  EXPECT_EXIT(
      {
        goro::run(opts(), [] {
          auto ln = goro::net::listen("tcp", "127.0.0.1:0");
          const std::string where = ln.addr().str();
          ln.close();
          try {
            goro::net::dial("tcp", where);
          } catch (const std::exception&) {
          }
        });
        std::fprintf(stderr, "done\n");
        child_exit(true);
      },
      ExitedWithCode(0), "done\n");
}
