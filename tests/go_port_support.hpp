// Shared by the ports of Go's own tests (tests/go_*_test.cpp): every test
// is value-parameterized over GOMAXPROCS 1, 2 and 4 and runs its body under
// goro::run with that setting; skips for known bugs go through one switch
// per file so they can be turned off together once the fixes land.
#pragma once

#include <chrono>
#include <goro/goro.hpp>
#include <string>

#include "test_support.hpp"

namespace goro_test {

// Runs fn as goroutine 1 of a runtime with `procs` Ps.
template <class F>
void run_at(int procs, F&& fn) {
  goro::options opt;
  opt.gomaxprocs = procs;
  goro::run(opt, std::forward<F>(fn));
}

// A fixture parameterized by GOMAXPROCS.
class go_port : public ::testing::TestWithParam<int> {
 protected:
  template <class F>
  void run(F&& fn) {
    run_at(GetParam(), std::forward<F>(fn));
  }
};

inline std::string procs_name(const ::testing::TestParamInfo<int>& info) {
  return "gomaxprocs" + std::to_string(info.param);
}

// A unique path for a Unix socket under /tmp (removed by the caller).
inline std::string unix_path(const std::string& tag) {
  static std::atomic<int> seq{0};
  return "/tmp/goro-gotest-" + std::to_string(::getpid()) + "-" + tag + "-" +
         std::to_string(seq++);
}

// Go's timeoutUpperBound: a deadline of d should fire within d * 11 / 10;
// scaled generously under sanitizers.
inline std::chrono::nanoseconds timeout_upper_bound(
    std::chrono::nanoseconds d) {
  return scaled<std::chrono::nanoseconds>(d * 11 / 10, d * 3);
}

// Go's nextTimeout: the timeout to try after one that took `actual`;
// false once the 4 s maximum is reached.
inline bool next_timeout(std::chrono::nanoseconds actual,
                         std::chrono::nanoseconds& next) {
  const std::chrono::nanoseconds max = std::chrono::seconds(4);
  if (actual >= max) return false;
  next = actual * 5 / 4;
  if (next > max) next = max;
  return true;
}

}  // namespace goro_test

// One instantiation over GOMAXPROCS 1, 2 and 4 for a go_port-derived suite
// (GO_PORT_PROCS). Under TSan, where each run costs 5-20x, GOMAXPROCS 4
// only (the most interleaving): the three settings would take about six
// of CI's 18 TSan minutes; the default, ASan and debug builds run all three.
#if GORO_TEST_TSAN
#define GO_PORT_PROCS ::testing::Values(4)
#else
#define GO_PORT_PROCS ::testing::Values(1, 2, 4)
#endif
#define GO_PORT_SUITE(suite) \
  INSTANTIATE_TEST_SUITE_P(Procs, suite, GO_PORT_PROCS, goro_test::procs_name)
