// Deadlock detection (Go's checkdead) and thread exhaustion, as death
// tests: ports of Go's crash tests TestSimpleDeadlock, TestLockedDeadlock,
// TestLockedDeadlock2, TestGoexitDeadlock and TestThreadExhaustion, and the
// cases that must NOT be reported (a pending timer, a blocking call, a
// plain thread that will still act).
//
// Every test runs its statement in a death-test child. The "threadsafe"
// style re-executes this binary for the one test, so the runtime starts
// fresh inside the child. Children that must survive end with exit code 0
// through child_exit, after printing what went wrong if anything did.
//
// This file deliberately does not include test_support.hpp: its per-test
// watchdog is a thread the runtime does not know about, and such a thread
// might still send, close or spawn, so checkdead (rightly) never reports a
// deadlock while it exists. Children get a SIGALRM watchdog instead.
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
#include <condition_variable>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <thread>

// White-box: waiters queued on a channel, and the M counts checkdead uses.
#include "chan/hchan.hpp"
#include "runtime/mstart.hpp"
#include "runtime/sched.hpp"

#if defined(__SANITIZE_THREAD__)
#define GORO_DL_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORO_DL_TSAN 1
#endif
#endif
#ifndef GORO_DL_TSAN
#define GORO_DL_TSAN 0
#endif

namespace {

using namespace std::chrono_literals;
using ::testing::ExitedWithCode;

constexpr const char* kDeadlock =
    "fatal error: all goroutines are asleep - deadlock!";
constexpr const char* kGoexitDeadlock =
    "fatal error: no goroutines \\(main called goro::goexit\\) - deadlock!";

// A child that hangs (a deadlock that is not detected) leaves with status 3
// after this long, through the raw exit_group system call.
extern "C" void child_watchdog_fired(int) {
  static const char msg[] =
      "\n[watchdog] death-test child still running: deadlock not detected "
      "or a hang; exiting with status 3\n";
  ssize_t r = ::write(2, msg, sizeof msg - 1);
  (void)r;
  ::syscall(SYS_exit_group, 3);
}

class DeadlockDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (::testing::internal::InDeathTestChild()) {
      struct sigaction sa = {};
      sa.sa_handler = child_watchdog_fired;
      sigaction(SIGALRM, &sa, nullptr);
      alarm(GORO_DL_TSAN ? 60 : 20);
    }
  }
};

// Ends a death-test child: 0 when ok, else 1 after printing why.
[[noreturn]] void child_exit(bool ok, const std::string& why = "") {
  if (!ok) std::fprintf(stderr, "child check failed: %s\n", why.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(ok ? 0 : 1);
}

// Blocks the calling goroutine forever on a channel nobody else holds.
void block_forever() {
  auto c = goro::make_chan<int>();
  c.recv();
}

// The no-false-positive children let a plain thread act (send, release a
// condition variable, start a second run) only once the runtime has been
// seen in the state where a wrong verdict would come: instead of sleeping
// and hoping it got there, they observe it. checkdead runs each time an M
// goes idle, under sched.lock, in the same critical section that counts it
// idle; so once no M is seen running, a false report would already have
// ended the child (exit 2) before the plain thread goes on.

// Receivers queued on ch right now (read under the channel lock).
std::size_t receivers_queued(const goro::chan<int>& ch) {
  goro::detail::hchan* c = ch.raw();
  c->lock.lock();
  std::size_t n = 0;
  for (goro::rt::sudog* sg = c->recvq.head(); sg != nullptr; sg = sg->next) n++;
  c->lock.unlock();
  return n;
}

// No M is running: all idle, idle while locked, or system threads (sysmon):
// checkdead's `run == 0`.
bool no_m_running() {
  using goro::rt::sched;
  goro::rt::lock_guard lk(sched.lock);
  return goro::rt::mcount() - sched.nmidle - sched.nmidlelocked - sched.nmsys ==
         0;
}

// Polls pred every 100 us until it holds or 10 s pass; returns pred().
template <class Pred>
bool await_state(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return pred();
    std::this_thread::sleep_for(100us);  // poll interval, not a wait for it
  }
  return true;
}

// ---------------------------------------------------------------------------
// Deadlocks that must be reported: exit status 2 and Go's message.

// Go's TestSimpleDeadlock: main blocks on a channel nobody sends on.
TEST_F(DeadlockDeathTest, MainBlockedOnChannel) {
  EXPECT_EXIT(
      {
        goro::run([] { block_forever(); });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

TEST_F(DeadlockDeathTest, MainBlockedOnNilChannel) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::chan<int> nil;
          nil.recv();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

TEST_F(DeadlockDeathTest, MainEmptySelect) {
  EXPECT_EXIT(
      {
        goro::run([] { goro::select(); });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

TEST_F(DeadlockDeathTest, MainWaitsOnWaitGroupNobodyCompletes) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::wait_group wg;
          wg.add(1);
          wg.wait();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

TEST_F(DeadlockDeathTest, MainLocksMutexTwice) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::mutex mu;
          mu.lock();
          mu.lock();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Other goroutines blocked in every kind of wait, main blocked too.
TEST_F(DeadlockDeathTest, GoroutinesBlockedToo) {
  EXPECT_EXIT(
      {
        goro::run([] {
          static goro::mutex mu;
          static goro::mutex mu2;
          static goro::cond cv;
          static goro::wait_group never;
          never.add(1);
          mu.lock();
          for (int i = 0; i < 10; i++) goro::go([] { block_forever(); });
          for (int i = 0; i < 10; i++) goro::go([] { never.wait(); });
          for (int i = 0; i < 10; i++) goro::go([] { goro::select(); });
          for (int i = 0; i < 10; i++)
            goro::go([] {
              std::unique_lock<goro::mutex> lk(mu2);
              cv.wait(lk);
            });
          for (int i = 0; i < 10; i++)
            goro::go([] {
              std::lock_guard<goro::mutex> lk(mu);  // main holds it
            });
          auto c = goro::make_chan<int>(1);
          c.send(1);
          for (int i = 0; i < 10; i++) goro::go([c] { c.send(2); });  // full
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Many goroutines ran and finished first; only then is everything asleep.
TEST_F(DeadlockDeathTest, AfterOtherGoroutinesFinish) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::wait_group wg;
          wg.add(1000);
          for (int i = 0; i < 1000; i++)
            goro::go([&] {
              goro::gosched();
              wg.done();
            });
          wg.wait();
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// A pending timer postpones the verdict; once it fired, the deadlock is
// reported.
TEST_F(DeadlockDeathTest, ReportedAfterTheLastTimerFires) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::go([] { block_forever(); });
          goro::sleep(30ms);
          std::fprintf(stderr, "main woke\n");
          block_forever();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), std::string("main woke\n(.|\n)*") + kDeadlock);
}

// Go's TestLockedDeadlock: main locked to its thread, then blocks.
TEST_F(DeadlockDeathTest, LockedDeadlock) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::lock_os_thread();
          goro::select();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Go's TestLockedDeadlock2: a locked goroutine blocks, then main blocks.
TEST_F(DeadlockDeathTest, LockedDeadlock2) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::go([] {
            goro::lock_os_thread();
            goro::select();
          });
          goro::sleep(1ms);
          goro::select();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Go's TestGoexitDeadlock: main calls goexit, the other goroutines finish,
// nothing is left.
TEST_F(DeadlockDeathTest, GoexitDeadlock) {
  EXPECT_EXIT(
      {
        goro::run([] {
          auto f = [] {
            for (int i = 0; i < 10; i++)
              std::atomic_signal_fence(std::memory_order_seq_cst);
          };
          goro::go(f);
          goro::go(f);
          goro::goexit();
        });
        child_exit(false, "run() returned after main called goexit");
      },
      ExitedWithCode(2), kGoexitDeadlock);
}

// The same when the others finish only later (after sleeping).
TEST_F(DeadlockDeathTest, GoexitDeadlockAfterSleepers) {
  EXPECT_EXIT(
      {
        goro::run([] {
          for (int i = 0; i < 10; i++)
            goro::go([i] {
              goro::sleep(std::chrono::milliseconds(5 + 2 * i));
              if (i == 9) std::fprintf(stderr, "last sleeper done\n");
            });
          goro::goexit();
        });
        child_exit(false, "run() returned after main called goexit");
      },
      ExitedWithCode(2),
      std::string("last sleeper done\n(.|\n)*") + kGoexitDeadlock);
}

// Main called goexit while another goroutine blocks forever: that one is
// asleep, so it is the ordinary report.
TEST_F(DeadlockDeathTest, GoexitWithBlockedGoroutine) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::go([] { block_forever(); });
          goro::goexit();
        });
        child_exit(false, "run() returned after main called goexit");
      },
      ExitedWithCode(2), kDeadlock);
}

// ---------------------------------------------------------------------------
// No false positives: these children must finish normally (exit 0).

// A sleeping main is not deadlocked (its timer will fire), even with every
// other goroutine blocked forever.
TEST_F(DeadlockDeathTest, NoFalsePositiveMainSleeps) {
  EXPECT_EXIT(
      {
        int r = goro::run([] {
          for (int i = 0; i < 10; i++) goro::go([] { block_forever(); });
          goro::sleep(50ms);
          return 7;
        });
        child_exit(r == 7, "run() returned " + std::to_string(r));
      },
      ExitedWithCode(0), "");
}

// Waiting on timer channels and after_func (pending timers) is not a
// deadlock.
TEST_F(DeadlockDeathTest, NoFalsePositiveTimerChannels) {
  EXPECT_EXIT(
      {
        int r = goro::run([] {
          goro::after(30ms).recv();
          goro::timer t(20ms);
          t.c.recv();
          auto c = goro::make_chan<int>();
          goro::timer f = goro::after_func(20ms, [c] { c.send(3); });
          int v = c.recv().value_or(0);
          goro::ticker tk(5ms);
          tk.c.recv();
          tk.c.recv();
          return v;
        });
        child_exit(r == 3, "run() returned " + std::to_string(r));
      },
      ExitedWithCode(0), "");
}

// A goroutine in a blocking call is running (its thread is in the kernel),
// so main waiting for it is not deadlocked.
TEST_F(DeadlockDeathTest, NoFalsePositiveMainInBlockingCall) {
  EXPECT_EXIT(
      {
        int r = goro::run([] {
          for (int i = 0; i < 5; i++) goro::go([] { block_forever(); });
          goro::blocking([] { ::usleep(50000); });
          goro::blocking_long([] { ::usleep(50000); });
          return 1;
        });
        child_exit(r == 1, "run() returned " + std::to_string(r));
      },
      ExitedWithCode(0), "");
}

// Main waits for a goroutine that is in a blocking call.
TEST_F(DeadlockDeathTest, NoFalsePositiveWaitingForBlockedCall) {
  EXPECT_EXIT(
      {
        int r = goro::run([] {
          auto c = goro::make_chan<int>();
          goro::go([c] {
            goro::blocking([] { ::usleep(50000); });
            goro::blocking_long([] { ::usleep(50000); });
            c.send(4);
          });
          return c.recv().value_or(0);
        });
        child_exit(r == 4, "run() returned " + std::to_string(r));
      },
      ExitedWithCode(0), "");
}

// A plain thread that has used goro and will send later: no deadlock. It
// sends only after seeing main blocked on c and every M idle. (A thread
// that never called into goro would not count: see
// ReportedNextToUnrelatedThread.)
TEST_F(DeadlockDeathTest, NoFalsePositiveWaitingForPlainThread) {
  EXPECT_EXIT(
      {
        auto c = goro::make_chan<int>();
        auto used = goro::make_chan<int>(1);
        std::atomic<bool> counted{false};
        bool seen = false;
        std::thread th([c, used, &seen, &counted]() mutable {
          used.send(1);  // has used goro: counts as running from here
          counted = true;
          seen = await_state(
              [&] { return receivers_queued(c) == 1 && no_m_running(); });
          c.send(5);
        });
        while (!counted) std::this_thread::yield();
        int r = goro::run([c] { return c.recv().value_or(0); });
        th.join();
        child_exit(r == 5 && seen,
                   "run() returned " + std::to_string(r) +
                       (seen ? ""
                             : "; main never seen blocked with no M "
                               "running"));
      },
      ExitedWithCode(0), "");
}

// Issue 25 bug 8: a plain thread whose only goro call so far was
// ch.len() counts as using goro. It then works (here: sleeps) for longer
// than the grace given to threads goro does not know, with main blocked
// and every M idle, and then sends: no deadlock verdict in between.
TEST_F(DeadlockDeathTest, NoFalsePositivePlainThreadThatOnlyAskedLen) {
  EXPECT_EXIT(
      {
        auto c = goro::make_chan<int>(1);
        auto block = goro::make_chan<int>();
        std::atomic<bool> counted{false};
        bool seen = false;
        std::thread th([c, block, &seen, &counted]() mutable {
          (void)c.len();  // the only goro call before the long work
          counted = true;
          seen = await_state(
              [&] { return receivers_queued(block) == 1 && no_m_running(); });
          // "Other work", past checkdead's one-second grace for threads
          // goro does not know.
          std::this_thread::sleep_for(std::chrono::milliseconds(3000));
          block.send(7);
        });
        while (!counted) std::this_thread::yield();
        int r = goro::run([block] { return block.recv().value_or(0); });
        th.join();
        child_exit(r == 7 && seen,
                   "run() returned " + std::to_string(r) +
                       (seen ? "" : "; main never seen blocked"));
      },
      ExitedWithCode(0), "");
}

// The same with a plain thread that is blocked on a std::condition_variable
// (outside the runtime) before it sends.
TEST_F(DeadlockDeathTest, NoFalsePositivePlainThreadBlockedOutsideRuntime) {
  EXPECT_EXIT(
      {
        std::mutex mu;
        std::condition_variable cv;
        bool go_on = false;
        auto c = goro::make_chan<int>();
        auto used = goro::make_chan<int>(1);
        std::atomic<bool> counted{false};
        std::thread th([&] {
          used.send(1);  // has used goro: counts as running from here
          counted = true;
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [&] { return go_on; });
          c.send(6);
        });
        while (!counted) std::this_thread::yield();
        bool seen = false;
        std::thread releaser([&] {
          seen = await_state(
              [&] { return receivers_queued(c) == 1 && no_m_running(); });
          {
            std::lock_guard<std::mutex> lk(mu);
            go_on = true;
          }
          cv.notify_all();
        });
        int r = goro::run([c] { return c.recv().value_or(0); });
        th.join();
        releaser.join();
        child_exit(r == 6 && seen,
                   "run() returned " + std::to_string(r) +
                       (seen ? ""
                             : "; main never seen blocked with no M "
                               "running"));
      },
      ExitedWithCode(0), "");
}

// The issue-11 rule: a thread that never called into goro (a logger, a
// library's worker) does not hide a deadlock. Here it waits on a
// std::condition_variable forever; main blocks on a channel nobody sends
// on: reported, with the goroutine dump.
TEST_F(DeadlockDeathTest, ReportedNextToUnrelatedThread) {
  EXPECT_EXIT(
      {
        static std::mutex mu;
        static std::condition_variable cv;
        std::thread([] {
          std::unique_lock<std::mutex> lk(mu);
          cv.wait(lk, [] { return false; });
        }).detach();
        goro::run([] { block_forever(); });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// Detection is armed only while a goro::run is in progress: goroutines
// left blocked after run() returned are not a deadlock, also once every M
// has gone idle (observed) with them still blocked.
TEST_F(DeadlockDeathTest, NoFalsePositiveAfterRunReturns) {
  EXPECT_EXIT(
      {
        goro::run([] {
          for (int i = 0; i < 10; i++) goro::go([] { block_forever(); });
        });
        const bool idle1 = await_state(no_m_running);
        // A second run works and is not killed either.
        int r = goro::run([] {
          goro::sleep(10ms);
          return 8;
        });
        const bool idle2 = await_state(no_m_running);
        child_exit(r == 8 && idle1 && idle2,
                   "second run() returned " + std::to_string(r) +
                       (idle1 && idle2 ? "" : "; the Ms never all went idle"));
      },
      ExitedWithCode(0), "");
}

// Main's deadlock is reported in a second run() too.
TEST_F(DeadlockDeathTest, ReportedInSecondRun) {
  EXPECT_EXIT(
      {
        goro::run([] {});
        goro::run([] { block_forever(); });
        child_exit(false, "second run() returned");
      },
      ExitedWithCode(2), kDeadlock);
}

// ---------------------------------------------------------------------------
// Thread exhaustion (Go's debug.SetMaxThreads and TestThreadExhaustion)

TEST_F(DeadlockDeathTest, SetMaxThreadsReturnsPrevious) {
  EXPECT_EXIT(
      {
        int prev = goro::set_max_threads(500);
        int again = goro::set_max_threads(prev);
        bool threw = false;
        try {
          goro::set_max_threads(0);
        } catch (const std::invalid_argument&) {
          threw = true;
        }
        child_exit(
            prev == 10000 && again == 500 && threw,
            "prev=" + std::to_string(prev) + " again=" + std::to_string(again));
      },
      ExitedWithCode(0), "");
}

// Go's TestThreadExhaustion: each goroutine locks its thread and blocks,
// so each needs a thread of its own.
TEST_F(DeadlockDeathTest, ThreadExhaustionLocked) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::set_max_threads(10);
          auto c = goro::make_chan<int>();
          for (int i = 0; i < 100; i++) {
            goro::go([c] {
              goro::lock_os_thread();
              c.send(0);
              goro::select();
            });
            c.recv();
          }
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2),
      "runtime: program exceeds 10-thread limit\n(.|\n)*fatal error: thread "
      "exhaustion");
}

// Goroutines stuck in blocking_long calls each hold a thread.
TEST_F(DeadlockDeathTest, ThreadExhaustionBlockingCalls) {
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::set_max_threads(12);
          static std::mutex mu;
          static std::condition_variable cv;
          for (int i = 0; i < 100; i++) {
            goro::go([] {
              goro::blocking_long([] {
                std::unique_lock<std::mutex> lk(mu);
                cv.wait(lk, [] { return false; });
              });
            });
          }
          goro::select();
        });
        child_exit(false, "run() returned");
      },
      ExitedWithCode(2),
      "runtime: program exceeds 12-thread limit\n(.|\n)*fatal error: thread "
      "exhaustion");
}

// Lowering the limit below the threads that exist is fatal at once.
TEST_F(DeadlockDeathTest, SetMaxThreadsBelowCurrent) {
  EXPECT_EXIT(
      {
        goro::run([] { goro::set_max_threads(1); });
        child_exit(false, "set_max_threads(1) returned");
      },
      ExitedWithCode(2),
      "runtime: program exceeds 1-thread limit\n(.|\n)*fatal error: thread "
      "exhaustion");
}

}  // namespace
