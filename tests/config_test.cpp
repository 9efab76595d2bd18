// Configuration: GORO_STACK_SIZE, GORO_STACK_GUARD and GOMAXPROCS parsed
// strictly (or, for GOMAXPROCS, as Go does), options::stack_size and
// options::guard validated, and options given to a runtime that is already
// running applied or reported, never silently dropped.
//
// Settings are read once, when the runtime starts, so every test that starts
// it runs in a death-test child ("threadsafe" style: the binary is
// re-executed for the one test and the runtime starts inside the child,
// after the child has set the environment). Children exit 0 when their
// checks hold and explain any failure on stderr.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <ostream>
#include <stdexcept>
#include <string>

#include "runtime/proc.hpp"
#include "runtime/stack.hpp"
#include "test_support.hpp"

namespace {

using ::testing::ExitedWithCode;

class ConfigTest : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (::testing::internal::InDeathTestChild())
      goro_test::arm_child_watchdog(
          std::chrono::seconds(goro_test::scaled(30, 90)));
  }
};

// Ends a death-test child: 0 when ok, else 1 after printing why.
[[noreturn]] void child_exit(bool ok, const std::string& why = "") {
  if (!ok) std::fprintf(stderr, "child check failed: %s\n", why.c_str());
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(ok ? 0 : 1);
}

// `s` as a POSIX extended regex matching itself.
std::string regex_quote(const std::string& s) {
  std::string r;
  for (char c : s) {
    if (std::string("\\^$.|?*+()[]{}").find(c) != std::string::npos) r += '\\';
    r += c;
  }
  return r;
}

// Starts the runtime (with `o`) and returns the default stack size.
std::size_t started_stack_size(const goro::options& o = {}) {
  std::size_t size = 0;
  goro::run(o, [&] { size = goro::rt::default_stack_size(); });
  return size;
}

// About 2 KiB per frame, written from the lowest address up so that the
// first write past the stack lands in the guard page; `depth` frames deep.
__attribute__((noinline)) std::uint64_t recurse(int depth) {
  volatile char buf[2048];
  for (std::size_t i = 0; i < sizeof buf; i += 64)
    buf[i] = static_cast<char>(depth);
  if (depth <= 0) return buf[0];
  std::uint64_t r = recurse(depth - 1);
  return r + static_cast<unsigned char>(buf[depth % sizeof buf]);
}

// Runs a goroutine that recurses through about 1 MiB of stack.
void recurse_one_mib_in_goroutine() {
  goro::run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      recurse(512);
      wg.done();
    });
    wg.wait();
  });
}

// ---------------------------------------------------------------------------
// GORO_STACK_SIZE syntax (no runtime needed)

TEST(StackSizeSyntax, Parses) {
  struct {
    const char* text;
    std::size_t bytes;
  } const ok[] = {
      {"16384", 16384},
      {"256k", 256 * 1024},
      {"256K", 256 * 1024},
      {"2m", 2 << 20},
      {"2M", 2 << 20},
      {"1g", std::size_t(1) << 30},
      {"1G", std::size_t(1) << 30},
      {"0", 0},
      {"007k", 7 * 1024},
      {"18446744073709551615", SIZE_MAX},
      {"17179869183g", ((std::size_t(1) << 34) - 1) << 30},
  };
  for (const auto& c : ok) {
    std::size_t v = 12345;
    EXPECT_TRUE(goro::rt::parse_stack_size(c.text, &v)) << c.text;
    EXPECT_EQ(v, c.bytes) << c.text;
  }
  const char* const bad[] = {"",
                             "garbage",
                             "12q",
                             "-5",
                             "+5",
                             "k",
                             "g",
                             " 64k",
                             "64k ",
                             "64 k",
                             "1gk",
                             "1kb",
                             "1KiB",
                             "1.5m",
                             "0x10000",
                             "18446744073709551616",
                             "17179869184g",
                             "99999999999999999999999k"};
  for (const char* s : bad) {
    std::size_t v = 12345;
    EXPECT_FALSE(goro::rt::parse_stack_size(s, &v)) << '"' << s << '"';
    EXPECT_EQ(v, 12345u) << "a failed parse must not store: " << s;
  }
}

TEST(StackSizeSyntax, Bounds) {
  EXPECT_NE(goro::rt::stack_size_problem(0), nullptr);
  EXPECT_NE(goro::rt::stack_size_problem(16 * 1024 - 1), nullptr);
  EXPECT_EQ(goro::rt::stack_size_problem(16 * 1024), nullptr);
  EXPECT_EQ(goro::rt::stack_size_problem(std::size_t(1) << 30), nullptr);
  EXPECT_NE(goro::rt::stack_size_problem((std::size_t(1) << 30) + 1), nullptr);
}

// ---------------------------------------------------------------------------
// GORO_STACK_SIZE: malformed or out-of-range values are fatal errors that
// name the variable and exit 2.

struct rejected_case {
  const char* value;
  const char* why;  // regex for the reason after "GORO_STACK_SIZE=value: "
};

void PrintTo(const rejected_case& c, std::ostream* os) {
  *os << '"' << c.value << '"';
}

class StackSizeRejected : public ConfigTest,
                          public ::testing::WithParamInterface<rejected_case> {
};

TEST_P(StackSizeRejected, IsFatal) {
  const rejected_case& c = GetParam();
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_SIZE", c.value, 1);
        std::size_t size = started_stack_size();
        child_exit(false, "the runtime started with " + std::to_string(size) +
                              "-byte stacks");
      },
      ExitedWithCode(2),
      "fatal error: GORO_STACK_SIZE=" + regex_quote(c.value) + ": " + c.why);
}

INSTANTIATE_TEST_SUITE_P(
    Values, StackSizeRejected,
    ::testing::Values(rejected_case{"garbage", "not a size"},
                      rejected_case{"12q", "not a size"},
                      rejected_case{"-5", "not a size"},
                      rejected_case{"k", "not a size"},
                      rejected_case{"", "empty"},
                      rejected_case{"1gk", "not a size"},
                      rejected_case{"99999999999999999999999", "above the 1g"},
                      rejected_case{"0", "below the 16k"},
                      rejected_case{"8k", "below the 16k"},
                      rejected_case{"16383", "below the 16k"},
                      rejected_case{"2g", "above the 1g"}),
    [](const ::testing::TestParamInfo<rejected_case>& info) {
      return "Case" + std::to_string(info.index);
    });

// Accepted values become the default stack size (rounded up to pages).
struct accepted_case {
  const char* value;
  std::size_t bytes;
};

void PrintTo(const accepted_case& c, std::ostream* os) {
  *os << '"' << c.value << '"';
}

class StackSizeAccepted : public ConfigTest,
                          public ::testing::WithParamInterface<accepted_case> {
};

TEST_P(StackSizeAccepted, SetsDefault) {
  const accepted_case& c = GetParam();
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_SIZE", c.value, 1);
        std::size_t size = started_stack_size();
        child_exit(size == c.bytes, std::string(c.value) + " gave " +
                                        std::to_string(size) + " bytes, want " +
                                        std::to_string(c.bytes));
      },
      ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(
    Values, StackSizeAccepted,
    ::testing::Values(accepted_case{"1g", std::size_t(1) << 30},
                      accepted_case{"1G", std::size_t(1) << 30},
                      accepted_case{"3M", 3 << 20},
                      accepted_case{"32K", 32 * 1024},
                      accepted_case{"16k", 16 * 1024},
                      accepted_case{"20000", 20480}),
    [](const ::testing::TestParamInfo<accepted_case>& info) {
      return "Case" + std::to_string(info.index);
    });

// 1g really gives goroutines a gibibyte: ~1 MiB of recursion fits (it used
// to become a 16 KiB stack, the g being dropped).
TEST_F(ConfigTest, OneGibibyteStackRunsDeepRecursion) {
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_SIZE", "1g", 1);
        setenv("GORO_STACK_GUARD", "mprotect", 1);
        recurse_one_mib_in_goroutine();
        child_exit(goro::rt::default_stack_size() == std::size_t(1) << 30,
                   "default stack is " +
                       std::to_string(goro::rt::default_stack_size()));
      },
      ExitedWithCode(0), "");
}

// The same recursion overflows a small stack, and the report gives the size
// that GORO_STACK_SIZE set (64 KiB less the guard page).
TEST_F(ConfigTest, SmallStackFromEnvironmentOverflows) {
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_SIZE", "64k", 1);
        setenv("GORO_STACK_GUARD", "mprotect", 1);
        recurse_one_mib_in_goroutine();
        child_exit(false, "1 MiB of recursion fit in a 64 KiB stack");
      },
      ExitedWithCode(2),
      "goroutine stack exceeds 61440-byte limit(.|\n)*"
      "fatal error: stack overflow");
}

// options::stack_size takes precedence over GORO_STACK_SIZE, which is then
// not read (so it cannot be fatal either).
TEST_F(ConfigTest, OptionsStackSizeOverridesEnvironment) {
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_SIZE", "garbage", 1);
        goro::options o;
        o.stack_size = 96 * 1024;
        std::size_t size = started_stack_size(o);
        child_exit(size == 96 * 1024, std::to_string(size));
      },
      ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// GORO_STACK_GUARD

class StackGuardRejected : public ConfigTest,
                           public ::testing::WithParamInterface<const char*> {};

TEST_P(StackGuardRejected, IsFatal) {
  const char* value = GetParam();
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_GUARD", value, 1);
        started_stack_size();
        child_exit(false, "the runtime started");
      },
      ExitedWithCode(2),
      "fatal error: GORO_STACK_GUARD=" + regex_quote(value) +
          ": want auto, madvise, mprotect or canary");
}

INSTANTIATE_TEST_SUITE_P(Values, StackGuardRejected,
                         ::testing::Values("bogus", "", "MPROTECT", "auto ",
                                           "none"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return "Case" + std::to_string(info.index);
                         });

TEST_F(ConfigTest, StackGuardFromEnvironmentOverridesOptions) {
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_GUARD", "canary", 1);
        goro::options o;
        o.guard = goro::stack_guard::mprotect;
        started_stack_size(o);
        child_exit(goro::rt::default_guard() == goro::rt::guard_kind::canary,
                   goro::rt::guard_name(goro::rt::default_guard()));
      },
      ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// GOMAXPROCS: as Go, a malformed value (or one below 1) is ignored and the
// default applies. Each value is built around n = default + 1, so a parser
// that reads a number out of it would give n, not the default.

class GomaxprocsIgnored : public ConfigTest,
                          public ::testing::WithParamInterface<const char*> {};

TEST_P(GomaxprocsIgnored, UsesDefault) {
  const char* format = GetParam();
  EXPECT_EXIT(
      {
        int def = goro::rt::default_gomaxprocs();
        char value[64];
        std::snprintf(value, sizeof value, format, def + 1);
        setenv("GOMAXPROCS", value, 1);
        int procs = 0;
        goro::run([&] { procs = goro::gomaxprocs(); });
        child_exit(procs == def, std::string("GOMAXPROCS=\"") + value +
                                     "\" gave " + std::to_string(procs) +
                                     " Ps, want the default " +
                                     std::to_string(def));
      },
      ExitedWithCode(0), "");
}

INSTANTIATE_TEST_SUITE_P(Values, GomaxprocsIgnored,
                         ::testing::Values("garbage", "", "0", "-%d", "+%d",
                                           " %d", "%d ", "%dx", "%d.0", "0x%d",
                                           "4294967296%d" /* 2^32 * 10^k + n */,
                                           "99999999999999999999%d"),
                         [](const ::testing::TestParamInfo<const char*>& info) {
                           return "Case" + std::to_string(info.index);
                         });

TEST_F(ConfigTest, GomaxprocsLeadingZerosAccepted) {
  EXPECT_EXIT(
      {
        setenv("GOMAXPROCS", "003", 1);
        int procs = 0;
        goro::run([&] { procs = goro::gomaxprocs(); });
        child_exit(procs == 3, std::to_string(procs));
      },
      ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// options values that no runtime can start with throw std::invalid_argument
// from run(), before anything starts.

void expect_invalid(const goro::options& o, const char* what_has) {
  try {
    goro::run(o, [] {});
  } catch (const std::invalid_argument& e) {
    if (std::string(e.what()).find(what_has) == std::string::npos)
      child_exit(false, std::string("message \"") + e.what() +
                            "\" does not contain \"" + what_has + "\"");
    return;
  }
  child_exit(false, std::string("no std::invalid_argument (") + what_has + ")");
}

TEST_F(ConfigTest, InvalidOptionsThrow) {
  EXPECT_EXIT(
      {
        unsetenv("GORO_STACK_SIZE");
        unsetenv("GORO_STACK_GUARD");
        goro::options o;
        o.stack_size = 100;
        expect_invalid(o, "stack_size = 100: below the 16k");
        o.stack_size = (std::size_t(1) << 30) + 1;
        expect_invalid(o, "stack_size = 1073741825: above the 1g");
        o.stack_size = SIZE_MAX;
        expect_invalid(o, "above the 1g");
        o.stack_size = 0;
        o.guard = static_cast<goro::stack_guard>(17);
        expect_invalid(o, "guard = 17");
        // Nothing has started: valid options still take effect.
        goro::options good;
        good.stack_size = 48 * 1024;
        std::size_t size = started_stack_size(good);
        child_exit(size == 48 * 1024, "started with " + std::to_string(size));
      },
      ExitedWithCode(0), "");
}

// ---------------------------------------------------------------------------
// Options reaching a runtime that is already running

// Expects run(o) on the running runtime to throw std::invalid_argument
// naming `option` and "already running".
void expect_rejected_later(const goro::options& o, const char* option) {
  bool ran = false;
  try {
    goro::run(o, [&] { ran = true; });
  } catch (const std::invalid_argument& e) {
    std::string what = e.what();
    if (what.find(option) == std::string::npos ||
        what.find("already running") == std::string::npos)
      child_exit(false, "message \"" + what + "\" does not name " + option);
    if (ran) child_exit(false, "run() ran its function, then threw");
    return;
  }
  child_exit(false, std::string("a conflicting ") + option +
                        " was accepted by a second run()");
}

void expect_accepted_later(const goro::options& o, const char* what) {
  try {
    goro::run(o, [] {});
  } catch (const std::exception& e) {
    child_exit(false, std::string(what) + ": " + e.what());
  }
}

TEST_F(ConfigTest, SecondRunConflictingStackSizeThrows) {
  EXPECT_EXIT(
      {
        unsetenv("GORO_STACK_SIZE");
        goro::options first;
        first.stack_size = 512 * 1024;
        started_stack_size(first);
        goro::options o;
        o.stack_size = 1 << 20;
        expect_rejected_later(o, "stack_size");
        expect_accepted_later(first, "the same stack_size");
        o.stack_size = 512 * 1024 - 100;  // the same number of pages
        expect_accepted_later(o, "a stack_size that rounds to the same");
        expect_accepted_later(goro::options{}, "stack_size 0");
        child_exit(goro::rt::default_stack_size() == 512 * 1024,
                   std::to_string(goro::rt::default_stack_size()));
      },
      ExitedWithCode(0), "");
}

// A runtime started lazily (by go() from a plain thread) has the default
// settings; a later run() asking for another stack size is told so.
TEST_F(ConfigTest, RunAfterLazyStartReportsStackSize) {
  EXPECT_EXIT(
      {
        unsetenv("GORO_STACK_SIZE");
        goro::wait_group wg;
        wg.add(1);
        goro::go([&] { wg.done(); });
        wg.wait();
        goro::options o;
        o.stack_size = 4 << 20;
        expect_rejected_later(o, "stack_size");
        child_exit(true);
      },
      ExitedWithCode(0), "");
}

TEST_F(ConfigTest, SecondRunConflictingGuardThrows) {
  EXPECT_EXIT(
      {
        unsetenv("GORO_STACK_GUARD");
        goro::options first;
        first.guard = goro::stack_guard::canary;
        started_stack_size(first);
        goro::options o;
        o.guard = goro::stack_guard::mprotect;
        expect_rejected_later(o, "guard");
        expect_accepted_later(first, "the same guard");
        expect_accepted_later(goro::options{}, "guard automatic");
        child_exit(true);
      },
      ExitedWithCode(0), "");
}

// GORO_STACK_GUARD overrides options::guard, in a later run() as in the
// first: the request resolves to what is running and is accepted.
TEST_F(ConfigTest, SecondRunGuardOverriddenByEnvironmentIsAccepted) {
  EXPECT_EXIT(
      {
        setenv("GORO_STACK_GUARD", "canary", 1);
        started_stack_size();
        goro::options o;
        o.guard = goro::stack_guard::mprotect;
        expect_accepted_later(o, "guard overridden by GORO_STACK_GUARD");
        child_exit(true);
      },
      ExitedWithCode(0), "");
}

// The P count can change at run time, so a later run() applies it.
TEST_F(ConfigTest, SecondRunAppliesGomaxprocs) {
  EXPECT_EXIT(
      {
        goro::options o;
        o.gomaxprocs = 2;
        int first = 0;
        int second = 0;
        int third = 0;
        goro::run(o, [&] { first = goro::gomaxprocs(); });
        o.gomaxprocs = 3;
        goro::run(o, [&] { second = goro::gomaxprocs(); });
        goro::run([&] { third = goro::gomaxprocs(); });  // 0: unchanged
        child_exit(first == 2 && second == 3 && third == 3,
                   std::to_string(first) + ", " + std::to_string(second) +
                       ", " + std::to_string(third));
      },
      ExitedWithCode(0), "");
}

}  // namespace
