// The SIGQUIT dump of a program whose goroutines wait in five different
// ways (issue 11): each goroutine's block shows its reason and a backtrace
// with the user's function, found in the executable's own symbol table (this
// test is linked without -rdynamic), and the process exits with status 2.
//
// The death-test child sends its stderr to a file before it raises SIGQUIT,
// so the parent can check each goroutine's block whatever order the dump
// lists them in. No test_support.hpp: its watchdog thread would be a thread
// the runtime does not know. Children are bounded by alarm().
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <goro/goro.hpp>
#include <sstream>
#include <string>

using ::testing::ExitedWithCode;
using namespace std::chrono_literals;

// Distinctive names, not inlined, so that the dump must find them.
__attribute__((noinline)) void sigquit_test_chan_receiver(goro::chan<int> ch) {
  auto v = ch.recv();
  asm volatile("" ::"r"(v.has_value()));
}

__attribute__((noinline)) void sigquit_test_mutex_waiter(goro::mutex* m) {
  m->lock();
  m->unlock();
  asm volatile("");
}

__attribute__((noinline)) void sigquit_test_sleeper() {
  goro::sleep(1h);
  asm volatile("");
}

__attribute__((noinline)) void sigquit_test_selecter(goro::chan<int> a,
                                                     goro::chan<int> b) {
  goro::select(goro::case_recv(a), goro::case_recv(b));
  asm volatile("");
}

__attribute__((noinline)) void sigquit_test_blocking_reader(int fd) {
  char c;
  ssize_t r = goro::blocking([&] { return ::read(fd, &c, 1); });
  asm volatile("" ::"r"(r));
}

namespace {

#if defined(__SANITIZE_THREAD__)
#define SIGQUIT_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIGQUIT_TEST_TSAN 1
#endif
#endif

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// The block of the dump whose frames name `fn`: from the "goroutine N ["
// header before it to the blank line after it.
std::string block_naming(const std::string& dump, const std::string& fn) {
  std::size_t at = dump.find(fn);
  if (at == std::string::npos) return "";
  std::size_t begin = dump.rfind("goroutine ", at);
  while (begin != std::string::npos && begin != 0 && dump[begin - 1] != '\n')
    begin = dump.rfind("goroutine ", begin - 1);
  if (begin == std::string::npos) return "";
  std::size_t end = dump.find("\n\n", at);
  return dump.substr(
      begin, end == std::string::npos ? std::string::npos : end - begin);
}

class SigquitDumpDeathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (::testing::internal::InDeathTestChild()) alarm(20);
  }
};

TEST_F(SigquitDumpDeathTest, EachWaitShowsItsReasonAndTheUsersFunction) {
#ifdef SIGQUIT_TEST_TSAN
  GTEST_SKIP() << "TSan defers asynchronous signal handlers to its own safe "
                  "points; the SIGQUIT path is covered by the other builds";
#endif
  // The "threadsafe" death-test child re-runs this test from the start in
  // a new process: both sides name the file after the parent's pid.
  const std::string file =
      "/tmp/goro_sigquit_dump_" +
      std::to_string(::testing::internal::InDeathTestChild() ? ::getppid()
                                                             : ::getpid());
  const char* path = file.c_str();
  EXPECT_EXIT(
      {
        goro::run([&] {
          auto ch = goro::make_chan<int>();
          auto a = goro::make_chan<int>(), b = goro::make_chan<int>();
          goro::mutex m;
          m.lock();
          int fds[2];
          if (::pipe(fds) != 0) std::_Exit(3);
          goro::go([ch] { sigquit_test_chan_receiver(ch); });
          goro::go([&m] { sigquit_test_mutex_waiter(&m); });
          goro::go([] { sigquit_test_sleeper(); });
          goro::go([a, b] { sigquit_test_selecter(a, b); });
          goro::go([fd = fds[0]] { sigquit_test_blocking_reader(fd); });
          // Wait until all five wait where they should (the dump shows it).
          auto until = std::chrono::steady_clock::now() + 10s;
          for (;;) {
            std::string d = goro::debug::stack(true);
            if (contains(d, "[chan receive]") &&
                contains(d, "[sync.Mutex.Lock]") && contains(d, "[sleep]") &&
                contains(d, "[select]") && contains(d, "[syscall"))
              break;
            if (std::chrono::steady_clock::now() > until) std::_Exit(4);
            goro::sleep(1ms);
          }
          int out = ::open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
          if (out < 0 || ::dup2(out, 2) < 0) std::_Exit(5);
          ::kill(::getpid(), SIGQUIT);
          goro::sleep(10s);  // sysmon prints and exits; bounded if not
        });
        std::exit(0);
      },
      ExitedWithCode(2), "");
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string dump = ss.str();
  ::unlink(path);
  ASSERT_EQ(dump.rfind("SIGQUIT: quit\n\n", 0), 0u) << dump;
  struct want {
    const char* fn;
    const char* reason;
  };
  for (want w : {want{"sigquit_test_chan_receiver", "[chan receive]:"},
                 want{"sigquit_test_mutex_waiter", "[sync.Mutex.Lock]:"},
                 want{"sigquit_test_sleeper", "[sleep]:"},
                 want{"sigquit_test_selecter", "[select]:"}}) {
    std::string block = block_naming(dump, w.fn);
    EXPECT_TRUE(contains(block, w.reason))
        << w.fn << " should be in a " << w.reason << " block:\n"
        << dump;
    EXPECT_TRUE(contains(block, "created by ")) << block;
  }
  // The goroutine in a blocking call is on another thread, in the kernel.
  EXPECT_TRUE(contains(dump, "[syscall")) << dump;
}

}  // namespace
