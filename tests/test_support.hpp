// Shared helpers for goro's tests (header only; not a test executable).
//
//  - GORO_TEST_SANITIZED: 1 under ASan/TSan (GCC or Clang), so tests can scale
//    their iteration counts down where everything runs 5-20x slower.
//  - scaled(n, m): n normally, m under a sanitizer.
//  - deadline: a steady_clock bound for spin/poll loops, so a broken feature
//    makes a test FAIL after a while instead of hanging until ctest's timeout.
//  - A per-test watchdog: if one test runs longer than GORO_TEST_WATCHDOG_S
//    seconds (default 60) it prints the test's name and aborts, so a hang in
//    the runtime (lost wake-up, deadlock) shows up as a named failure.
#pragma once

#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <goro/runtime.hpp>
#include <mutex>
#include <string>
#include <thread>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define GORO_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define GORO_TEST_SANITIZED 1
#endif
#endif
#ifndef GORO_TEST_SANITIZED
#define GORO_TEST_SANITIZED 0
#endif

// TSan counts every fiber (goroutine) as a thread and dies past 8128 of
// them, so tests that keep many goroutines alive at once cap them there.
#if defined(__SANITIZE_THREAD__)
#define GORO_TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORO_TEST_TSAN 1
#endif
#endif
#ifndef GORO_TEST_TSAN
#define GORO_TEST_TSAN 0
#endif

namespace goro_test {

// Goroutines alive at the same time: n normally, fewer under sanitizers.
template <class T>
constexpr T live_scaled(T normal, T sanitized) {
  return GORO_TEST_TSAN ? (sanitized < 4000 ? sanitized : 4000)
                        : (GORO_TEST_SANITIZED ? sanitized : normal);
}

template <class T>
constexpr T scaled(T normal, T sanitized) {
  return GORO_TEST_SANITIZED ? sanitized : normal;
}

// n normally, `asan` under ASan (or any sanitizer but TSan), `tsan` under
// TSan, which is several times slower again for switch-heavy tests.
template <class T>
constexpr T scaled(T normal, T asan, T tsan) {
  return GORO_TEST_TSAN ? tsan : (GORO_TEST_SANITIZED ? asan : normal);
}

using clock = std::chrono::steady_clock;

struct deadline {
  clock::time_point at;
  explicit deadline(std::chrono::milliseconds d) : at(clock::now() + d) {}
  bool passed() const { return clock::now() >= at; }
};

// Polls pred, yielding, until it holds or `limit` passes; returns pred().
template <class Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit =
                               std::chrono::milliseconds(5000)) {
  deadline dl(limit);
  while (!pred()) {
    if (dl.passed()) return pred();
    goro::gosched();
  }
  return true;
}

// Inside a goroutine: raises gomaxprocs to at least n for the scope and puts
// the previous value back at its end (also when an ASSERT returns early), so
// a test that needs parallelism runs at any GOMAXPROCS instead of skipping.
struct min_procs {
  int old;
  explicit min_procs(int n) : old(goro::gomaxprocs()) {
    if (old < n) goro::gomaxprocs(n);
  }
  ~min_procs() {
    if (goro::gomaxprocs() != old) goro::gomaxprocs(old);
  }
  min_procs(const min_procs&) = delete;
  min_procs& operator=(const min_procs&) = delete;
};

// A numeric field of /proc/self/status ("Threads:", "VmRSS:" in KiB), or
// -1 when it is missing.
inline long proc_status(const char* field) {
  std::ifstream f("/proc/self/status");
  std::string line;
  std::size_t n = std::strlen(field);
  while (std::getline(f, line))
    if (line.compare(0, n, field) == 0) return std::stol(line.substr(n));
  return -1;
}

// Aborts the process (naming the test) when a single test runs too long.
// The state is leaked on purpose: the detached thread outlives gtest's
// listener objects at process exit.
struct watchdog_state {
  std::mutex mu;
  std::condition_variable cv;
  std::string name;
  bool armed = false;
  clock::time_point until{};
  std::chrono::seconds limit{60};

  void loop() {
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
      if (!armed) {
        cv.wait(lk);
        continue;
      }
      auto u = until;
      if (cv.wait_until(lk, u) == std::cv_status::timeout && armed &&
          until == u) {
        std::fprintf(stderr,
                     "\n[watchdog] test %s still running after %lld s: "
                     "probable hang (lost wake-up or deadlock); aborting\n",
                     name.c_str(), static_cast<long long>(limit.count()));
        std::fflush(stderr);
        std::abort();
      }
    }
  }
};

class watchdog : public ::testing::EmptyTestEventListener {
 public:
  watchdog() : st_(new watchdog_state) {
    const char* env = std::getenv("GORO_TEST_WATCHDOG_S");
    if (env && std::atoi(env) > 0)
      st_->limit = std::chrono::seconds(std::atoi(env));
    std::thread([s = st_] { s->loop(); }).detach();
  }
  void OnTestStart(const ::testing::TestInfo& info) override {
    std::lock_guard<std::mutex> lk(st_->mu);
    st_->name = std::string(info.test_suite_name()) + "." + info.name();
    st_->armed = true;
    st_->until = clock::now() + st_->limit;
    st_->cv.notify_all();
  }
  void OnTestEnd(const ::testing::TestInfo&) override {
    std::lock_guard<std::mutex> lk(st_->mu);
    st_->armed = false;
    st_->cv.notify_all();
  }

 private:
  watchdog_state* st_;
};

// gtest does not forward test events to listeners inside a death-test
// child, so children get their own watchdog: after `limit` the process
// leaves with status 3 through the raw exit_group system call (a sanitizer's
// _exit interceptor may itself be stuck when the runtime has wedged it).
inline void arm_child_watchdog(std::chrono::seconds limit) {
  std::thread([limit] {
    std::this_thread::sleep_for(limit);
    static const char msg[] =
        "\n[watchdog] death-test child still running: probable hang; "
        "exiting with status 3\n";
    ssize_t r = ::write(2, msg, sizeof msg - 1);
    (void)r;
    ::syscall(SYS_exit_group, 3);
  }).detach();
}

inline bool install_watchdog() {
  ::testing::UnitTest::GetInstance()->listeners().Append(new watchdog);
  return true;
}

}  // namespace goro_test

// One watchdog per test executable (inline variable: initialised once).
inline const bool goro_test_watchdog_installed = goro_test::install_watchdog();
