// Goroutine dumps (traceback.cpp, symtab.cpp): goro::debug::stack for the
// caller and for every goroutine (parked ones unwound from their saved
// context), Go's header and "created by" lines, user function names from
// the symbol table (this test is linked without -rdynamic), the SIGQUIT
// dump (exit 2) and the dump after a deadlock, GORO_TRACEBACK=none.
//
// Like deadlock_test.cpp, this file does not include test_support.hpp: its
// watchdog thread is a thread the runtime does not know, which (rightly)
// vetoes deadlock detection. Death-test children are bounded by alarm().
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <goro/goro.hpp>
#include <goro/stats.hpp>
#include <string>

#include "runtime/dwarfline.hpp"
#include "runtime/testhook.hpp"

using ::testing::ExitedWithCode;
using namespace std::chrono_literals;

// Distinctive names, not inlined, so that the dump must find them.
__attribute__((noinline)) void traceback_test_parked_receiver(
    goro::chan<int> ch) {
  auto v = ch.recv();
  asm volatile("" ::"r"(v.has_value()));
}

__attribute__((noinline)) void traceback_test_mutex_waiter(goro::mutex* m) {
  m->lock();
  m->unlock();
  asm volatile("");
}

__attribute__((noinline)) std::string traceback_test_self_dump() {
  std::string s = goro::debug::stack(false);
  asm volatile("");
  return s;
}

// Spins call-free inside a preempt_guard (so it stays _Grunning on its
// thread) until *stop.
__attribute__((noinline)) void traceback_test_spinner(
    std::atomic<bool>* started, std::atomic<bool>* stop) {
  goro::preempt_guard g;
  started->store(true);
  while (!stop->load(std::memory_order_relaxed)) {
  }
}

// The line of the call below, for the file:line check.
int traceback_test_call_line = 0;

__attribute__((noinline)) void traceback_test_line_caller(goro::chan<int> ch) {
  traceback_test_call_line = __LINE__ + 1;
  traceback_test_parked_receiver(ch);
  asm volatile("");
}

namespace {

// Polls pred, yielding, for up to 5 s.
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

// The block of the dump that starts with "goroutine <id> [".
std::string block_of(const std::string& dump, std::uint64_t id) {
  std::string head = "goroutine " + std::to_string(id) + " [";
  std::size_t at = dump.find(head);
  if (at == std::string::npos) return "";
  std::size_t end = dump.find("\n\ngoroutine ", at);
  return dump.substr(at,
                     end == std::string::npos ? std::string::npos : end - at);
}

}  // namespace

TEST(Traceback, SelfShowsRunningAndTheCallersName) {
  goro::run([] {
    std::string s = traceback_test_self_dump();
    std::string head =
        "goroutine " + std::to_string(goro::goroutine_id()) + " [running]:";
    EXPECT_EQ(s.rfind(head, 0), 0u) << s;
    // (GCC tags the std::string return type:
    // traceback_test_self_dump[abi:cxx11]())
    EXPECT_TRUE(contains(s, "traceback_test_self_dump")) << s;
    // The function given to goro::run, started by the runtime: as Go's
    // main goroutine, no "created by" (it would name goro's run_main).
    EXPECT_FALSE(contains(s, "created by")) << s;
    EXPECT_FALSE(contains(s, "run_main")) << s;
  });
}

TEST(Traceback, AllShowsParkedGoroutinesWithReasonFramesAndCreator) {
  goro::run([] {
    auto ch = goro::make_chan<int>();
    goro::mutex m;
    m.lock();
    std::atomic<std::uint64_t> rid{0}, mid{0};
    goro::wait_group done;
    done.add(2);
    goro::go([&] {
      rid = goro::goroutine_id();
      traceback_test_parked_receiver(ch);
      done.done();
    });
    goro::go([&] {
      mid = goro::goroutine_id();
      traceback_test_mutex_waiter(&m);
      done.done();
    });
    ASSERT_TRUE(eventually([&] { return rid.load() != 0 && mid.load() != 0; }));
    // Both must have parked: poll the dump until they show their reasons.
    std::string dump;
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      return contains(block_of(dump, rid), "[chan receive]") &&
             contains(block_of(dump, mid), "[sync.Mutex.Lock]");
    })) << dump;
    // The caller comes first.
    EXPECT_EQ(dump.rfind("goroutine " + std::to_string(goro::goroutine_id()) +
                             " [running]:",
                         0),
              0u)
        << dump;
    std::string r = block_of(dump, rid), mu = block_of(dump, mid);
    EXPECT_TRUE(contains(r, "traceback_test_parked_receiver(goro::chan<int>)"))
        << r;
    EXPECT_TRUE(contains(mu, "traceback_test_mutex_waiter(goro::mutex*)"))
        << mu;
    EXPECT_TRUE(contains(mu, "goro::mutex::")) << mu;  // goro's API frames stay
    std::string parent =
        " in goroutine " + std::to_string(goro::goroutine_id());
    EXPECT_TRUE(contains(r, "created by ")) << r;
    EXPECT_TRUE(contains(r, parent)) << r;
    // The runtime's own frames are left out.
    EXPECT_FALSE(contains(r, "goro::rt::")) << r;
    EXPECT_FALSE(contains(r, "goro_on_gstack")) << r;
    m.unlock();
    ch.send(1);
    done.wait();
  });
}

// G.waitsince: a goroutine parked "two minutes ago" (the coarse clock moved
// forward by the test hook after it parked) shows the wait; one that parked
// after the move does not.
TEST(Traceback, LongWaitShowsMinutes) {
  goro::run([] {
    auto old_ch = goro::make_chan<int>();
    auto new_ch = goro::make_chan<int>();
    std::atomic<std::uint64_t> old_id{0}, new_id{0};
    goro::wait_group done;
    done.add(2);
    goro::go([&] {
      old_id = goro::goroutine_id();
      traceback_test_parked_receiver(old_ch);
      done.done();
    });
    std::string dump;
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      return old_id.load() != 0 &&
             contains(block_of(dump, old_id), "[chan receive]:");
    })) << dump;
    goro::rt::coarse_clock_advance_for_test(150);
    goro::go([&] {
      new_id = goro::goroutine_id();
      traceback_test_parked_receiver(new_ch);
      done.done();
    });
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      return new_id.load() != 0 &&
             contains(block_of(dump, new_id), "[chan receive");
    })) << dump;
    EXPECT_TRUE(contains(block_of(dump, old_id), "[chan receive, 2 minutes]:"))
        << dump;
    EXPECT_TRUE(contains(block_of(dump, new_id), "[chan receive]:")) << dump;
    // The caller is running: no wait time.
    EXPECT_EQ(dump.rfind("goroutine " + std::to_string(goro::goroutine_id()) +
                             " [running]:",
                         0),
              0u)
        << dump;
    old_ch.send(1);
    new_ch.send(1);
    done.wait();
    goro::rt::coarse_clock_advance_for_test(-150);
  });
}

// Whether libdw finds this binary's own line table (clang-14's is not
// readable by Debian 12's elfutils 0.188, whatever the DWARF version).
bool test_binary_has_lines() {
  std::string file;
  int line = 0;
  return goro::rt::dwarf_line(
      reinterpret_cast<std::uintptr_t>(&traceback_test_line_caller) + 1, &file,
      &line);
}

// With DWARF (the tests are built with -g) and libdw, a frame's second line
// is the source position: "\t/path/traceback_test.cpp:123 +0x1d".
TEST(Traceback, FramesShowFileAndLine) {
  if (!goro::rt::dwarf_lines_available())
    GTEST_SKIP() << "no file:line: libgoro was built without elfutils' "
                    "libdwfl.h, or libdw.so.1 cannot be loaded";
  if (!test_binary_has_lines())
    GTEST_SKIP() << "libdw reads no line table of this test binary (elfutils "
                    "0.188 cannot read clang-14's: eu-addr2line prints ??:0 "
                    "too); dumps print the object's path instead";
  goro::run([] {
    auto ch = goro::make_chan<int>();
    std::atomic<std::uint64_t> id{0};
    goro::wait_group done;
    done.add(1);
    goro::go([&] {
      id = goro::goroutine_id();
      traceback_test_line_caller(ch);
      done.done();
    });
    std::string dump;
    ASSERT_TRUE(eventually([&] {
      dump = goro::debug::stack(true);
      return id.load() != 0 && contains(block_of(dump, id), "[chan receive]");
    })) << dump;
    std::string b = block_of(dump, id);
    std::size_t at = b.find("\ntraceback_test_line_caller(");
    ASSERT_NE(at, std::string::npos) << b;
    at = b.find("\n\t", at + 1);
    ASSERT_NE(at, std::string::npos) << b;
    std::string second = b.substr(at + 2);
    second = second.substr(0, second.find('\n'));
    std::string pos =
        "traceback_test.cpp:" + std::to_string(traceback_test_call_line) +
        " +0x";
    EXPECT_TRUE(contains(second, pos)) << "want " << pos << " in:\n" << b;
    EXPECT_EQ(second[0], '/') << b;  // a full path, as Go prints
    ch.send(1);
    done.wait();
  });
}

// libdw's line-table reader needs a few hundred KiB of stack: lookups run
// on a stack of their own, so a dump taken on a small goroutine stack
// (here 64 KiB) still gets its lines.
TEST(Traceback, FileAndLineFromASmallGoroutineStack) {
  if (!goro::rt::dwarf_lines_available())
    GTEST_SKIP() << "no file:line: libgoro was built without elfutils' "
                    "libdwfl.h, or libdw.so.1 cannot be loaded";
  if (!test_binary_has_lines())
    GTEST_SKIP() << "libdw reads no line table of this test binary (elfutils "
                    "0.188 cannot read clang-14's: eu-addr2line prints ??:0 "
                    "too); dumps print the object's path instead";
  goro::run([] {
    std::string s;
    goro::wait_group done;
    done.add(1);
    goro::go(goro::go_options{.stack_size = 64 * 1024}, [&] {
      s = traceback_test_self_dump();
      done.done();
    });
    done.wait();
    EXPECT_TRUE(contains(s, "traceback_test.cpp:")) << s;
  });
}

TEST(Traceback, PlainThreadGetsEmptySelfStack) {
  EXPECT_EQ(goro::debug::stack(false), "");
}

class TracebackDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    // A hang in the child ends it (SIGALRM kills it: not the expected exit).
    if (::testing::internal::InDeathTestChild()) alarm(20);
  }
};

#if defined(__SANITIZE_THREAD__)
#define TRACEBACK_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRACEBACK_TEST_TSAN 1
#endif
#endif

TEST_F(TracebackDeathTest, SigquitDumpsEveryGoroutineAndExits2) {
#ifdef TRACEBACK_TEST_TSAN
  GTEST_SKIP() << "TSan defers asynchronous signal handlers to its own safe "
                  "points, and the "
                  "handler's sysmon wake-up may come after the 10 s bound";
#endif
  EXPECT_EXIT(
      {
        goro::run([] {
          auto ch = goro::make_chan<int>();
          goro::go([ch] { traceback_test_parked_receiver(ch); });
          // Until the receiver has parked (it may have been stolen by the
          // other P's thread, still starting): bounded.
          for (int i = 0; i < 100000 && goro::stats().waiting == 0; i++)
            goro::gosched();
          ::kill(::getpid(), SIGQUIT);
          // sysmon prints and exits; bounded in case it does not.
          goro::sleep(10s);
        });
        std::exit(0);
      },
      ExitedWithCode(2),
      "SIGQUIT: quit\n\n(.|\n)*"
      "goroutine [0-9]+ \\[chan "
      "receive\\]:\n(.|\n)*traceback_test_parked_receiver");
}

// A goroutine running on another thread: the SIGQUIT dump interrupts its
// thread with the preemption signal and shows the frames it was running.
TEST_F(TracebackDeathTest, SigquitShowsFramesOfRunningGoroutines) {
#ifdef TRACEBACK_TEST_TSAN
  GTEST_SKIP() << "under TSan the preemption signal's handler is not "
                  "installed (TSan defers asynchronous signals): running "
                  "goroutines show no frames";
#endif
  EXPECT_EXIT(
      {
        goro::options o;
        o.gomaxprocs = 2;
        goro::run(o, [] {
          std::atomic<bool> started{false}, stop{false};
          goro::go([&] { traceback_test_spinner(&started, &stop); });
          while (!started.load()) goro::gosched();
          ::kill(::getpid(), SIGQUIT);
          // sysmon prints and exits; bounded in case it does not.
          goro::sleep(10s);
          stop = true;
        });
        std::exit(0);
      },
      ExitedWithCode(2),
      "SIGQUIT: quit\n\n(.|\n)*"
      "goroutine [0-9]+ \\[running\\]:\n"
      // (at -O0 the loop calls std::atomic's load: frames above it)
      "([^\n]*\n\t[^\n]*\n)*"
      "traceback_test_spinner\\(std::atomic<bool>\\*, "
      "std::atomic<bool>\\*\\)\\(\\.\\.\\.\\)\n\t[^\n]+ \\+0x[0-9a-f]+\n");
}

TEST_F(TracebackDeathTest, DeadlockReportIsFollowedByTheDump) {
  EXPECT_EXIT(
      {
        goro::run([] {
          auto ch = goro::make_chan<int>();
          goro::go([ch] { traceback_test_parked_receiver(ch); });
          ch.recv();
        });
        std::exit(0);
      },
      ExitedWithCode(2),
      "fatal error: all goroutines are asleep - deadlock!\n\n(.|\n)*"
      "goroutine [0-9]+ \\[chan "
      "receive\\]:\n(.|\n)*traceback_test_parked_receiver");
}

TEST_F(TracebackDeathTest, GorotracebackNoneKeepsOnlyTheMessage) {
  EXPECT_EXIT(
      {
        setenv("GORO_TRACEBACK", "none", 1);
        goro::run([] {
          auto ch = goro::make_chan<int>();
          ch.recv();
        });
        std::exit(0);
      },
      ExitedWithCode(2),
      "^fatal error: all goroutines are asleep - deadlock!\n$");
}
