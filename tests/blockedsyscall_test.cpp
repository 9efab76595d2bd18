// Issue 23: code goro does not control never stalls or strands a
// goroutine. A goroutine blocked in a system call goro was not told about
// (a read(2) made through syscall(2), the futex of a C++20 semaphore) loses its
// P after about GORO_DEBUG=blockedsyscall us (blockedsyscall.cpp), so the
// goroutine that would unblock it gets to run. Each program runs in a child
// process with an alarm: before the hand-off they hung for good at GOMAXPROCS 1
// (and the 200 readers at 2). Under TSan the hand-off is off (the handler
// cannot redirect a thread there): those tests skip.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <semaphore.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/sync.hpp>
#include <semaphore>
#include <string>
#include <thread>
#include <vector>

#include "preempt_support.hpp"
#include "test_support.hpp"

namespace {

// A read(2) goro is not told about. A plain read() of a pipe in a goroutine
// parks on the poller (src/interpose/); made through syscall(2) it is a
// system call goro never sees, which is what these tests hand off.
ssize_t raw_read(int fd, void* buf, std::size_t n) {
  return syscall(SYS_read, fd, buf, n);
}

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

#define SKIP_UNDER_TSAN()                                                 \
  do {                                                                    \
    if (GORO_TEST_TSAN)                                                   \
      GTEST_SKIP() << "the blocked-call hand-off is off under TSan (its " \
                      "handler cannot redirect a thread)";                \
  } while (0)

using goro_test::procs;

// The child's bound: a hang is a failure with a message, not a stuck test.
void child_alarm() {
  signal(SIGALRM, [](int) {
    static const char msg[] = "hung: killed by the test's alarm\n";
    (void)!write(2, msg, sizeof msg - 1);
    _exit(3);
  });
  alarm(20);
}

// One goroutine blocks in a plain call (`wait`); the goroutine that
// unblocks it (`wake`) can only run once the waiter's thread has lost its
// P (at GOMAXPROCS 1 the only one).
template <class Wait, class Wake>
void plain_call_program(int nprocs, Wait wait, Wake wake) {
  child_alarm();
  bool ok = false;
  goro::run(procs(nprocs), [&] {
    std::atomic<bool> waiting{false};
    goro::wait_group wg;
    wg.add(2);
    bool got = false;
    goro::go([&] {
      waiting.store(true);
      got = wait();
      wg.done();
    });
    goro::go([&] {
      while (!waiting.load()) goro::gosched();
      if (!wake()) _exit(5);
      wg.done();
    });
    wg.wait();
    ok = got;
  });
  std::_Exit(ok ? 0 : 1);
}

// A plain read(2) of a pipe whose writer is a goroutine.
void plain_read_program(int nprocs) {
  int fds[2];
  if (pipe(fds) != 0) _exit(4);
  plain_call_program(
      nprocs,
      [&] {
        char c = 0;
        return raw_read(fds[0], &c, 1) == 1 && c == 'x';
      },
      [&] { return write(fds[1], "x", 1) == 1; });
}

TEST(BlockedSyscall, PlainReadWhoseWriterIsAGoroutineP1) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(plain_read_program(1), ::testing::ExitedWithCode(0), "^$");
}

TEST(BlockedSyscall, PlainReadWhoseWriterIsAGoroutineP2) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(plain_read_program(2), ::testing::ExitedWithCode(0), "^$");
}

// A blocking recv(2), as inside a C client library, on a socket pair whose
// other end a goroutine writes.
TEST(BlockedSyscall, BlockingRecvWhosePeerIsAGoroutineP1) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) _exit(4);
        plain_call_program(
            1,
            [&] {
              char c = 0;
              return recv(sv[0], &c, 1, 0) == 1 && c == 'x';
            },
            [&] { return send(sv[1], "x", 1, 0) == 1; });
      },
      ::testing::ExitedWithCode(0), "^$");
}

// sem_wait on a POSIX semaphore that a goroutine posts.
TEST(BlockedSyscall, SemWaitPostedByAGoroutineP1) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        static sem_t sem;
        if (sem_init(&sem, 0, 0) != 0) _exit(4);
        plain_call_program(
            1, [] { return sem_wait(&sem) == 0; },
            [] { return sem_post(&sem) == 0; });
      },
      ::testing::ExitedWithCode(0), "^$");
}

// 200 goroutines in plain reads of one pipe, then one goroutine writes a
// byte for each: at GOMAXPROCS 2 the readers held both Ps. The threads
// grow as Go's do for blocking cgo calls: one per blocked call.
TEST(BlockedSyscall, TwoHundredPlainReadsAtP2) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        child_alarm();
        constexpr int n = 200;
        int fds[2];
        if (pipe(fds) != 0) _exit(4);
        std::atomic<int> got{0};
        goro::run(procs(2), [&] {
          std::atomic<int> started{0};
          goro::wait_group wg;
          wg.add(n);
          for (int i = 0; i < n; i++)
            goro::go([&] {
              started.fetch_add(1);
              char c;
              if (raw_read(fds[0], &c, 1) == 1) got.fetch_add(1);
              wg.done();
            });
          while (started.load() < n) goro::gosched();
          std::vector<char> bytes(n, 'y');
          if (write(fds[1], bytes.data(), n) != n) _exit(5);
          wg.wait();
        });
        bool handed = goro::debug::read_preempt_stats().blocked_handoffs > 0;
        std::_Exit(got.load() == n && handed ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "^$");
}

// The fourth program: a goroutine holds a C++20 binary_semaphore
// (a futex in inline header code: nothing to interpose) across ~80 ms of
// its own code and is preempted there (a 1 ms slice); another goroutine
// acquires the semaphore and blocks its thread in the kernel. The holder
// is pinned to its own thread, which waits for a P that the blocked thread
// holds: the hand-off gives it one.
void semaphore_program(int nprocs) {
  child_alarm();
  bool ok = false;
  goro::run(procs(nprocs), [&] {
    goro::debug::set_time_slice(1ms);
    std::binary_semaphore sem(1);
    std::atomic<bool> held{false};
    std::atomic<int> done{0};
    goro::wait_group wg;
    // Waiters enough to block every P's thread.
    const int waiters = 2 * nprocs;
    wg.add(1 + waiters);
    goro::go([&] {
      sem.acquire();
      held.store(true);
      goro_test::work_us(80 * 1000);
      sem.release();
      done.fetch_add(1);
      wg.done();
    });
    for (int i = 0; i < waiters; i++)
      goro::go([&] {
        while (!held.load()) goro::gosched();
        sem.acquire();
        sem.release();
        done.fetch_add(1);
        wg.done();
      });
    wg.wait();
    ok = done.load() == 1 + waiters;
  });
  std::_Exit(ok ? 0 : 1);
}

TEST(BlockedSyscall, SemaphoreHeldAcrossAPreemptionP1) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(semaphore_program(1), ::testing::ExitedWithCode(0), "^$");
}

TEST(BlockedSyscall, SemaphoreHeldAcrossAPreemptionP2) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(semaphore_program(2), ::testing::ExitedWithCode(0), "^$");
}

// Issue 23 item 6: a thread blocked where it cannot be handed off (here a
// plain read inside a goro::preempt_guard) while goroutines wait for its P
// is reported once, with the goroutine's stack, instead of hanging in
// silence. The child captures its own stderr: a plain thread reads it and
// writes the byte the reader waits for once the report is out.
// capture = false: stderr as it is (the report is fatal).
void guarded_read_program(bool capture) {
  child_alarm();
  int data[2], err[2];
  if (pipe(data) != 0 || pipe(err) != 0) _exit(4);
  int saved = dup(2);
  if (capture) dup2(err[1], 2);
  std::string text;
  std::thread watcher([&] {
    if (!capture) return;
    char buf[4096];
    bool sent = false;
    for (;;) {
      ssize_t n = raw_read(err[0], buf, sizeof buf);
      if (n <= 0) break;
      text.append(buf, std::size_t(n));
      if (!sent && text.find("cannot be handed off") != std::string::npos &&
          text.find("\n\n") != std::string::npos) {
        sent = true;
        char c = 'x';
        if (write(data[1], &c, 1) != 1) _exit(5);
      }
    }
  });
  goro::run(procs(1), [&] {
    std::atomic<bool> reading{false};
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      goro::preempt_guard g;
      reading.store(true);
      char c;
      (void)!raw_read(data[0], &c, 1);
      wg.done();
    });
    goro::go([&] {
      while (!reading.load()) goro::gosched();
      wg.done();
    });
    wg.wait();
  });
  dup2(saved, 2);
  close(err[1]);
  watcher.join();
  (void)!write(2, text.data(), text.size());
  std::_Exit(0);
}

TEST(BlockedSyscall, BlockedWhereItCannotBeHandedOffIsReportedOnce) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "blockedreport=100", 1);
        guarded_read_program(true);
      },
      ::testing::ExitedWithCode(0),
      "^goro: goroutine [0-9]+ has kept its processor for [0-9]+ ms while "
      "its thread \\(tid [0-9]+\\) is blocked in the kernel, and 1 "
      "goroutine\\(s\\) wait for a processor; it cannot be handed off: "
      "inside a goro::preempt_guard[^\n]*\n"
      "goroutine [0-9]+ \\[running\\]:\n(.|\n)*guarded_read_program(.|\n)*"
      "\n\n$");
}

TEST(BlockedSyscall, BlockedFatalMakesTheReportFatal) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "blockedreport=100,blockedfatal=1", 1);
        guarded_read_program(false);
      },
      ::testing::ExitedWithCode(2),
      "fatal error: a processor is held by a thread blocked in the kernel");
}

// The control: with the hand-off off, the plain read hangs at GOMAXPROCS
// 1 (so the tests above can fail).
TEST(BlockedSyscall, ControlOffHangs) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "blockedsyscall=0", 1);
        signal(SIGALRM, [](int) { _exit(7); });
        alarm(1);
        int fds[2];
        if (pipe(fds) != 0) _exit(4);
        goro::run(procs(1), [&] {
          std::atomic<bool> reading{false};
          goro::go([&] {
            reading.store(true);
            char c;
            (void)!raw_read(fds[0], &c, 1);
          });
          while (!reading.load()) goro::gosched();
          char c = 'x';
          (void)!write(fds[1], &c, 1);
        });
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(7), "");
}

}  // namespace
