// Issue 29: the settings read from the environment when the runtime starts
// (GORO_TIMESLICE, GORO_STACK_SIZE, GORO_DEBUG) are parsed without
// overflow: a number too large for its type, or one that only fits before
// its unit is applied, is refused with a fatal error (exit code 2) instead
// of wrapping into the allowed range. Each case runs in a child process
// (a death test), since the settings are read once per process. Durations
// given to the API (timeouts, timers) saturate to "never" instead.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <chrono>
#include <cstdlib>
#include <goro/context.hpp>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/time.hpp>
#include <string>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;

// Starts the runtime in a child with name=value set; the child exits 0 if
// the runtime started, and with the runtime's fatal error otherwise.
void expect_refused(const char* name, const char* value,
                    const std::string& message) {
  EXPECT_EXIT(
      {
        setenv(name, value, 1);
        goro::run([] {});
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(2), "fatal error: " + message)
      << name << "=" << value;
}

void expect_accepted(const char* name, const char* value) {
  EXPECT_EXIT(
      {
        setenv(name, value, 1);
        goro::run([] {});
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "")
      << name << "=" << value;
}

// Parsing only: each value is a child process that starts the runtime,
// ~1 s apiece under TSan, where there is nothing of this to check for
// races; the other presets run them.
#define SKIP_UNDER_TSAN()                                  \
  do {                                                     \
    if (GORO_TEST_TSAN)                                    \
      GTEST_SKIP() << "parsing only; slow children under " \
                      "TSan";                              \
  } while (0)

// 18446744074 s is 2^64 ns and a bit: it used to wrap to a 290 ms slice.
// 9223372037 s wrapped to a negative slice; 10^11 s and more, or a number
// past 2^64, read as "not a duration" although they are durations.
TEST(Settings, TimeSliceTooLongIsRefused) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* const too_long[] = {
      "18446744074s",           "9223372037s",
      "100000000000s",          "18446744073709552ms",
      "18446744073709551616ns", "99999999999999999999999999us",
      "10000000001ns"};
  for (const char* v : too_long)
    expect_refused(
        "GORO_TIMESLICE", v,
        std::string("GORO_TIMESLICE=") + v + ": longer than the maximum, 10s");
}

TEST(Settings, TimeSliceBoundsStillWork) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_TIMESLICE", "10s", 1);
        goro::run([] {});
        std::_Exit(goro::debug::set_time_slice(5ms) == 10s ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(
      {
        setenv("GORO_TIMESLICE", "10000000000ns", 1);
        goro::run([] {});
        std::_Exit(goro::debug::set_time_slice(5ms) == 10s ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
  expect_refused("GORO_TIMESLICE", "99us",
                 "GORO_TIMESLICE=99us: shorter than the minimum, 100us");
  expect_refused("GORO_TIMESLICE", "18446744074",
                 "GORO_TIMESLICE=18446744074: not a duration");
  expect_refused("GORO_TIMESLICE", "-1s", "GORO_TIMESLICE=-1s: not a duration");
  expect_refused("GORO_TIMESLICE", "1h", "GORO_TIMESLICE=1h: not a duration");
}

// A size that overflows size_t before or after its suffix is a size, too
// large: said so, not "not a size".
TEST(Settings, StackSizeTooLargeIsRefused) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* const too_large[] = {
      "99999999999999999999k", "18446744073709551615M", "18446744073709551616",
      "17179869184g", "2g"};
  for (const char* v : too_large)
    expect_refused("GORO_STACK_SIZE", v,
                   std::string("GORO_STACK_SIZE=") + v +
                       ": above the 1g \\(1 GiB\\) maximum");
  expect_refused("GORO_STACK_SIZE", "12q", "GORO_STACK_SIZE=12q: not a size");
  expect_accepted("GORO_STACK_SIZE", "64k");
}

// GORO_DEBUG's values are decimal numbers within int32; std::atoi read
// 99999999999 as 1215752191 (and anything else as 0).
TEST(Settings, DebugValueOutOfRangeIsRefused) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const char* const bad[] = {"schedtrace=99999999999",
                             "longrunning=2147483648",
                             "oslockpark=18446744073709551617",
                             "scheddetail=-1",
                             "asyncpreemptsig=abc",
                             "asyncpreemptoff=1x",
                             "asyncpreempt="};
  for (const char* v : bad)
    expect_refused(
        "GORO_DEBUG", v,
        std::string("GORO_DEBUG=") + v + ": not a number in 0..2147483647");
  // The pair at fault is named, not the whole list.
  expect_refused("GORO_DEBUG", "oslockpark=1,schedtrace=99999999999",
                 "GORO_DEBUG=schedtrace=99999999999: not a number");
}

TEST(Settings, DebugValuesInRangeAndUnknownKeysStillWork) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  expect_accepted("GORO_DEBUG", "longrunning=2147483647,oslockpark=0");
  expect_accepted("GORO_DEBUG", "nosuchkey=99999999999999999999,x,=,");
  expect_accepted("GORO_DEBUG", "");
}

// Timeouts and timers saturate to "never" rather than overflowing into the
// past (these passed before the fix as well; kept as regressions).
TEST(Settings, HugeDurationsSaturate) {
  goro::run([] {
    auto [ctx, cancel] =
        goro::with_timeout(goro::background(), std::chrono::nanoseconds::max());
    EXPECT_FALSE(ctx.err());
    ASSERT_TRUE(ctx.deadline().has_value());
    EXPECT_EQ(*ctx.deadline(), goro::time_point::max());
    cancel();
    goro::timer t(std::chrono::nanoseconds::max());
    EXPECT_TRUE(t.stop());                         // still pending
    goro::sleep(std::chrono::nanoseconds::min());  // returns at once
  });
}

}  // namespace
