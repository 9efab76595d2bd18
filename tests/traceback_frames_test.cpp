// Goroutine dumps a programmer can read (issue 25): frames at the user's
// file:line when a goro call is inlined into the user's code (DWARF inline
// records), the goroutine's own function when it left by a tail call
// (G.startpc), lambdas named by where they are written, goroutine 1 named
// by the function given to goro::run. The checks read file:line of known
// lines of this file (__LINE__), in -O2 and -O0 builds alike.
//
// No test_support.hpp: its watchdog thread would be a thread the runtime
// does not know (see traceback_test.cpp). Every wait is bounded.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <goro/stats.hpp>
#include <iostream>
#include <stdexcept>
#include <string>

#include "runtime/dwarfline.hpp"

using namespace std::chrono_literals;

// Lines of this file the dumps must point at, set where they are.
int frames_test_send_line = 0;

// goro::chan<int>::send is inlined here in -O2 builds: the frame must still
// read frames_test_sender at the line of the call, with send's own frame
// (chan.hpp) above it.
__attribute__((noinline)) void frames_test_sender(goro::chan<int> ch) {
  frames_test_send_line = __LINE__ + 1;
  ch.send(1);
  asm volatile("");
}

// Its last statement is a call: -O2 builds leave by a tail call (jmp
// lock_slow), so no frame of it is on the stack while it waits.
__attribute__((noinline)) void frames_test_tail_locker(goro::mutex* m) {
  m->lock();
}

// The line of the throw below.
const int frames_test_throw_line = __LINE__ + 4;
__attribute__((noinline)) void frames_test_thrower(int v) {
  if (v > 0) {
    asm volatile("");
    throw std::runtime_error("frames-test-boom");
  }
}

// About 2 KiB per frame, written from the lowest address up, so the first
// write below the stack faults in the guard page (as death_test.cpp's).
volatile std::uint64_t frames_test_limit = ~std::uint64_t{0};
const int frames_test_recurse_line = __LINE__ + 6;
__attribute__((noinline)) std::uint64_t frames_test_recurse(std::uint64_t d) {
  volatile char buf[2048];
  for (std::size_t i = 0; i < sizeof buf; i += 64)
    buf[i] = static_cast<char>(d);
  if (d >= frames_test_limit) return buf[0];
  std::uint64_t r = frames_test_recurse(d + 1);
  return r + static_cast<unsigned char>(buf[d % sizeof buf]);
}

__attribute__((noinline)) void frames_test_receiver(goro::chan<int> ch) {
  auto v = ch.recv();
  asm volatile("" ::"r"(v.has_value()));
}

namespace {

template <class Pred>
bool eventually(Pred pred) {
  auto until = std::chrono::steady_clock::now() + 5s;
  while (!pred()) {
    if (std::chrono::steady_clock::now() >= until) return pred();
    goro::gosched();
  }
  return true;
}

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

std::string block_of(const std::string& dump, std::uint64_t id) {
  std::string head = "goroutine " + std::to_string(id) + " [";
  std::size_t at = dump.find(head);
  if (at == std::string::npos) return "";
  std::size_t end = dump.find("\n\ngoroutine ", at);
  return dump.substr(at,
                     end == std::string::npos ? std::string::npos : end - at);
}

// The position line ("\t/path/file:line ...") after the frame line that
// starts with `fn`; empty if there is none.
std::string position_after(const std::string& block, const std::string& fn) {
  std::size_t at = block.find("\n" + fn);
  if (at == std::string::npos) return "";
  at = block.find("\n\t", at + 1);
  if (at == std::string::npos) return "";
  std::size_t end = block.find('\n', at + 2);
  return block.substr(
      at + 2, end == std::string::npos ? std::string::npos : end - at - 2);
}

std::string here(int line) {
  return "/traceback_frames_test.cpp:" + std::to_string(line);
}

bool have_lines() {
  std::string file;
  int line = 0;
  return goro::rt::dwarf_lines_available() &&
         goro::rt::dwarf_line(
             reinterpret_cast<std::uintptr_t>(&frames_test_sender) + 1, &file,
             &line);
}

#define FRAMES_TEST_NEED_LINES()                                         \
  if (!have_lines())                                                     \
  GTEST_SKIP() << "no file:line: libgoro was built without libdwfl.h, "  \
                  "libdw.so.1 cannot be loaded, or it cannot read this " \
                  "binary's DWARF (elfutils 0.188 and clang-14's)"

}  // namespace

TEST(TracebackFrames, InlinedGoroCallShowsTheUsersLine) {
  FRAMES_TEST_NEED_LINES();
  goro::run([] {
    auto ch = goro::make_chan<int>();
    std::atomic<std::uint64_t> id{0};
    goro::wait_group done;
    done.add(1);
    goro::go([&] {
      id = goro::goroutine_id();
      frames_test_sender(ch);
      done.done();
    });
    std::string dump;
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      return id.load() != 0 && contains(block_of(dump, id), "[chan send]");
    })) << dump;
    std::string b = block_of(dump, id);
    std::string pos =
        position_after(b, "frames_test_sender(goro::chan<int>)(...)");
    EXPECT_TRUE(contains(pos, here(frames_test_send_line)))
        << "want " << here(frames_test_send_line) << " in:\n"
        << b;
    // The API's own frame stays, at its own line, above the caller's.
    EXPECT_TRUE(contains(b, "goro::chan<int>::send(")) << b;
    EXPECT_LT(b.find("goro::chan<int>::send("), b.find("frames_test_sender"))
        << b;
    ch.recv();
    done.wait();
  });
}

TEST(TracebackFrames, FunctionLeftByATailCallStillShows) {
  FRAMES_TEST_NEED_LINES();
  // The locker ends holding the mutex, possibly after run() returned (it
  // is woken by the unlock below): the mutex must outlive this scope, so
  // it lives on the heap, reachable from a static (no leak report).
  static goro::mutex* keep = nullptr;
  keep = new goro::mutex;
  goro::run([] {
    goro::mutex& m = *keep;
    m.lock();
    goro::go(frames_test_tail_locker, &m);
    std::string dump, b;
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      std::size_t at = dump.find("[sync.Mutex.Lock]");
      if (at == std::string::npos) return false;
      std::size_t begin = dump.rfind("goroutine ", at);
      b = dump.substr(begin, dump.find("\n\n", at) - begin);
      return true;
    })) << dump;
    EXPECT_TRUE(contains(b, "\nframes_test_tail_locker(goro::mutex*)(...)\n"))
        << b;
    EXPECT_TRUE(contains(position_after(b, "frames_test_tail_locker("),
                         "/traceback_frames_test.cpp:"))
        << b;
    m.unlock();
  });
}

TEST(TracebackFrames, LambdasReadAsWrittenAndGoroutineOneAsGivenToRun) {
  FRAMES_TEST_NEED_LINES();
  const int run_line = __LINE__ + 1;
  goro::run([&] {
    auto ch = goro::make_chan<int>();
    std::atomic<std::uint64_t> id{0};
    goro::wait_group done;
    done.add(1);
    const int lambda_line = __LINE__ + 1;
    goro::go([&] {
      id = goro::goroutine_id();
      ch.recv();
      done.done();
    });
    std::string dump;
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      return id.load() != 0 && contains(block_of(dump, id), "[chan receive]");
    })) << dump;
    std::string b = block_of(dump, id);
    std::string name =
        "lambda at traceback_frames_test.cpp:" + std::to_string(lambda_line) +
        "(...)";
    EXPECT_TRUE(contains(b, name)) << "want " << name << " in:\n" << b;
    EXPECT_FALSE(contains(b, "{lambda(")) << b;
    EXPECT_FALSE(contains(b, "goro::detail::")) << b;
    // This goroutine (the first block) is the function given to goro::run.
    std::string self = block_of(dump, goro::goroutine_id());
    std::string main_name =
        "lambda at traceback_frames_test.cpp:" + std::to_string(run_line) +
        "(...)";
    EXPECT_TRUE(contains(self, main_name)) << "want " << main_name << " in:\n"
                                           << self;
    EXPECT_FALSE(contains(self, "run_main")) << self;
    EXPECT_FALSE(contains(self, "std::function")) << self;
    ch.send(1);
    done.wait();
  });
}

class TracebackFramesDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // A hang in the child ends it (SIGALRM kills it: not the expected exit).
    if (::testing::internal::InDeathTestChild()) alarm(20);
  }
};

#if defined(__SANITIZE_THREAD__)
#define FRAMES_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define FRAMES_TEST_TSAN 1
#endif
#endif

// The panic report shows the stack the exception was thrown from (recorded
// in the unwinder's search phase), down to the throw's line.
TEST_F(TracebackFramesDeathTest, PanicShowsWhereItWasThrown) {
  // (Without file:line, clang-14 builds: the thrower's frame, no line.)
  std::string want =
      "panic: frames-test-boom\n\ngoroutine [0-9]+ \\[running\\]:\n"
      "[^\n]*uncaught exception of type std::runtime_error[^\n]*\n"
      "frames_test_thrower\\(int\\)\\(\\.\\.\\.\\)\n\t";
  if (have_lines())
    want += "/[^\n]*traceback_frames_test\\.cpp:" +
            std::to_string(frames_test_throw_line) + " ";
  EXPECT_EXIT(
      {
        goro::run([] {
          goro::wait_group wg;
          wg.add(1);
          goro::go([] { frames_test_thrower(1); });
          wg.wait();  // never: the panic ends the process
        });
        std::exit(0);
      },
      ::testing::ExitedWithCode(2), want);
}

// Exceptions caught inside the goroutine are not reports: only one that
// nothing catches reaches the goroutine's first frame.
TEST(TracebackFrames, CaughtExceptionsAreNotPanics) {
  goro::run([] {
    int caught = 0;
    for (int i = 0; i < 100; i++) {
      try {
        frames_test_thrower(1);
      } catch (const std::runtime_error&) {
        caught++;
      }
    }
    EXPECT_EQ(caught, 100);
  });
}

// The stack overflow report shows the frames that overflowed, and the
// program's unflushed output is not lost.
TEST_F(TracebackFramesDeathTest, StackOverflowShowsTheOverflowingFrames) {
#ifdef FRAMES_TEST_TSAN
  GTEST_SKIP() << "under TSan the overflow report prints no frames: "
                  "symbolizing in the SIGSEGV handler allocates, which TSan "
                  "reports as a signal-unsafe call";
#endif
  std::string want =
      "fatal error: stack overflow\n(.|\n)*frames-test-partial(.|\n)*"
      "goroutine [0-9]+ \\[running\\]:\n(.|\n)*"
      "frames_test_recurse\\(unsigned long\\)\\(\\.\\.\\.\\)\n\t";
  if (have_lines())
    want += "/[^\n]*traceback_frames_test\\.cpp:" +
            std::to_string(frames_test_recurse_line) + " ";
  EXPECT_EXIT(
      {
        ::dup2(2, 1);  // stdout, fully buffered (a pipe), into the check
        std::printf("frames-test-partial");
        goro::run([] {
          goro::wait_group wg;
          wg.add(1);
          goro::go([&] {
            frames_test_recurse(0);
            wg.done();
          });
          wg.wait();
        });
        std::exit(0);
      },
      ::testing::ExitedWithCode(2), want);
}

// Go handles SIGQUIT even when the process started with it ignored (only
// SIGHUP and SIGINT keep an inherited SIG_IGN): set here before the runtime
// starts, exactly what a parent's SIG_IGN leaves across exec.
TEST_F(TracebackFramesDeathTest, SigquitIgnoredAtStartStillDumps) {
#ifdef FRAMES_TEST_TSAN
  GTEST_SKIP() << "TSan defers asynchronous signal handlers to its own safe "
                  "points; the SIGQUIT path is covered by the other builds";
#endif
  EXPECT_EXIT(
      {
        ::signal(SIGQUIT, SIG_IGN);
        goro::run([] {
          auto ch = goro::make_chan<int>();
          goro::go([ch] { frames_test_receiver(ch); });
          for (int i = 0; i < 100000 && goro::stats().waiting == 0; i++)
            goro::gosched();
          ::kill(::getpid(), SIGQUIT);
          goro::sleep(10s);  // sysmon dumps and exits; bounded if not
        });
        std::exit(0);
      },
      ::testing::ExitedWithCode(2),
      "SIGQUIT: quit\n(.|\n)*frames_test_receiver");
}

// Output the program buffered (C stdio, and std::cout unsynchronized from
// stdio) comes out before the SIGQUIT dump.
TEST_F(TracebackFramesDeathTest, SigquitFlushesBufferedOutput) {
#ifdef FRAMES_TEST_TSAN
  GTEST_SKIP() << "TSan defers asynchronous signal handlers to its own safe "
                  "points; the SIGQUIT path is covered by the other builds";
#endif
  EXPECT_EXIT(
      {
        ::dup2(2, 1);  // stdout, fully buffered (a pipe), into the check
        std::ios::sync_with_stdio(false);
        std::printf("frames-test-printf");
        std::cout << "frames-test-cout";
        goro::run([] {
          ::kill(::getpid(), SIGQUIT);
          goro::sleep(10s);  // sysmon dumps and exits; bounded if not
        });
        std::exit(0);
      },
      ::testing::ExitedWithCode(2),
      "frames-test-printf(.|\n)*SIGQUIT: quit|frames-test-cout(.|\n)*"
      "frames-test-printf(.|\n)*SIGQUIT: quit");
}
