// Execution trace (goro::trace, GORO_TRACE): a small program's trace is
// valid JSON in Chrome's Trace Event format, its begin/end events pair up
// per track, every goroutine that ran is named after its function, spawns
// name their parent, unparks their waker, parks their wait reason; the API
// refuses bad use with the documented exceptions.
#include "runtime/trace.hpp"

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <goro/chan.hpp>
#include <goro/fd.hpp>
#include <goro/goro.hpp>
#include <goro/runtime.hpp>
#include <goro/stats.hpp>
#include <goro/sync.hpp>
#include <goro/time.hpp>
#include <goro/trace.hpp>
#include <goro/wait_group.hpp>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include "test_support.hpp"

namespace {

// ---------------------------------------------------------------------------
// A tiny JSON reader (RFC 8259 subset enough to validate: objects, arrays,
// strings with escapes, numbers, true/false/null). Throws on any error.

struct json {
  enum kind_t { null, boolean, number, string, array, object } kind = null;
  bool b = false;
  double num = 0;
  std::string str;
  std::vector<json> arr;
  // An object's members, in order (two vectors: a pair with the
  // still-incomplete json is not allowed as a vector element by clang).
  std::vector<std::string> keys;
  std::vector<json> vals;

  const json* get(const std::string& k) const {
    for (std::size_t i = 0; i < keys.size(); i++)
      if (keys[i] == k) return &vals[i];
    return nullptr;
  }
};

struct json_parser {
  const std::string& s;
  std::size_t i = 0;

  [[noreturn]] void fail(const char* what) {
    throw std::runtime_error(std::string("JSON: ") + what + " at offset " +
                             std::to_string(i));
  }
  void ws() {
    while (i < s.size() &&
           (s[i] == ' ' || s[i] == '\n' || s[i] == '\r' || s[i] == '\t'))
      i++;
  }
  void expect(char c) {
    ws();
    if (i >= s.size() || s[i] != c) fail("unexpected character");
    i++;
  }
  std::string parse_string() {
    expect('"');
    std::string out;
    while (true) {
      if (i >= s.size()) fail("unterminated string");
      char c = s[i++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (i >= s.size()) fail("bad escape");
      char e = s[i++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u':
          if (i + 4 > s.size()) fail("bad \\u");
          for (int k = 0; k < 4; k++)
            if (!std::isxdigit(static_cast<unsigned char>(s[i + k])))
              fail("bad \\u");
          out += '?';
          i += 4;
          break;
        default:
          fail("bad escape");
      }
    }
  }
  json parse_value() {
    ws();
    if (i >= s.size()) fail("unexpected end");
    json v;
    char c = s[i];
    if (c == '{') {
      v.kind = json::object;
      i++;
      ws();
      if (i < s.size() && s[i] == '}') {
        i++;
        return v;
      }
      while (true) {
        std::string k = parse_string();
        expect(':');
        {
          json val = parse_value();
          v.keys.push_back(k);
          v.vals.push_back(std::move(val));
        }
        ws();
        if (i < s.size() && s[i] == ',') {
          i++;
          continue;
        }
        expect('}');
        return v;
      }
    }
    if (c == '[') {
      v.kind = json::array;
      i++;
      ws();
      if (i < s.size() && s[i] == ']') {
        i++;
        return v;
      }
      while (true) {
        v.arr.push_back(parse_value());
        ws();
        if (i < s.size() && s[i] == ',') {
          i++;
          continue;
        }
        expect(']');
        return v;
      }
    }
    if (c == '"') {
      v.kind = json::string;
      v.str = parse_string();
      return v;
    }
    for (const char* lit : {"true", "false", "null"}) {
      std::size_t n = std::strlen(lit);
      if (s.compare(i, n, lit) == 0) {
        i += n;
        v.kind = lit[0] == 'n' ? json::null : json::boolean;
        v.b = lit[0] == 't';
        return v;
      }
    }
    // Number: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
    std::size_t start = i;
    if (s[i] == '-') i++;
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i])))
      fail("bad value");
    if (s[i] == '0')
      i++;
    else
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
        i++;
    if (i < s.size() && s[i] == '.') {
      i++;
      if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i])))
        fail("bad fraction");
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
        i++;
    }
    if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
      i++;
      if (i < s.size() && (s[i] == '+' || s[i] == '-')) i++;
      if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i])))
        fail("bad exponent");
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])))
        i++;
    }
    v.kind = json::number;
    v.num = std::strtod(s.c_str() + start, nullptr);
    return v;
  }
  json parse() {
    json v = parse_value();
    ws();
    if (i != s.size()) fail("trailing characters");
    return v;
  }
};

json read_json(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  json_parser p{text};
  return p.parse();
}

std::string tmp_path(const char* name) {
  return "/tmp/goro_trace_test_" + std::to_string(::getpid()) + "_" + name;
}

const std::string& sarg(const json& ev, const char* k) {
  static const std::string empty;
  const json* a = ev.get("args");
  const json* v = a ? a->get(k) : nullptr;
  return v && v->kind == json::string ? v->str : empty;
}
double narg(const json& ev, const char* k) {
  const json* a = ev.get("args");
  const json* v = a ? a->get(k) : nullptr;
  return v && v->kind == json::number ? v->num : -1;
}
// A number member of an object (otherData); -1 if absent.
double narg_of(const json& obj, const char* k) {
  const json* v = obj.get(k);
  return v && v->kind == json::number ? v->num : -1;
}
std::string field(const json& ev, const char* k) {
  const json* v = ev.get(k);
  return v && v->kind == json::string ? v->str : std::string();
}

// The checks every trace must pass; returns the events.
const std::vector<json>& check_wellformed(const json& doc) {
  EXPECT_EQ(doc.kind, json::object);
  const json* evs = doc.get("traceEvents");
  if (evs == nullptr || evs->kind != json::array)
    throw std::runtime_error("no traceEvents array");
  // Per track (pid, tid): B/E nest properly, end balanced, time ordered.
  std::map<std::pair<double, double>, int> depth;
  std::map<std::pair<double, double>, double> last_ts;
  for (const json& e : evs->arr) {
    std::string ph = field(e, "ph");
    EXPECT_FALSE(ph.empty());
    if (ph == "M") continue;
    const json* pid = e.get("pid");
    const json* tid = e.get("tid");
    const json* ts = e.get("ts");
    EXPECT_TRUE(pid && tid && ts);
    if (!(pid && tid && ts)) continue;
    auto key = std::make_pair(pid->num, tid->num);
    auto it = last_ts.find(key);
    if (it != last_ts.end()) {
      EXPECT_GE(ts->num, it->second);
    }
    last_ts[key] = ts->num;
    if (ph == "B") depth[key]++;
    if (ph == "E") {
      depth[key]--;
      EXPECT_GE(depth[key], 0)
          << "E without B on track " << pid->num << "/" << tid->num;
    }
  }
  for (auto& [k, d] : depth)
    EXPECT_EQ(d, 0) << "unclosed slice on track " << k.first << "/" << k.second;
  return evs->arr;
}

// Calls fn(ph, e, ts) for each event on the P tracks (pid 1), metadata
// left out, in file order.
template <class F>
void on_p_tracks(const std::vector<json>& evs, F fn) {
  for (const json& e : evs) {
    std::string ph = field(e, "ph");
    const json* pid = e.get("pid");
    if (ph == "M" || pid == nullptr || pid->num != 1) continue;
    fn(ph, e, e.get("ts")->num);
  }
}

// Runs body as goro::run's main goroutine at `procs` Ps, traced into
// `path`; returns the file, parsed.
json traced_run(const std::string& path, int procs,
                const std::function<void()>& body) {
  goro::options opt;
  opt.gomaxprocs = procs;
  goro::run(opt, [&] {
    goro::trace::start(path);
    body();
    goro::trace::stop();
    return 0;
  });
  return read_json(path);
}

TEST(Trace, SmallProgramIsValidAndNamed) {
  std::string path = tmp_path("small.json");
  std::uint64_t main_goid = 0, pinger = 0, ponger = 0;
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [&] {
    goro::gomaxprocs(2);
    goro::trace::start(path);
    EXPECT_TRUE(goro::trace::active());
    main_goid = goro::goroutine_id();
    goro::wait_group wg;
    // Channel ping-pong.
    auto ping = goro::make_chan<int>();
    auto pong = goro::make_chan<int>();
    wg.add(2);
    goro::go([&] {
      pinger = goro::goroutine_id();
      for (int i = 0; i < 50; i++) {
        ping.send(i);
        pong.recv();
      }
      wg.done();
    });
    goro::go([&] {
      ponger = goro::goroutine_id();
      for (int i = 0; i < 50; i++) {
        int v = ping.recv().value();
        pong.send(v);
      }
      wg.done();
    });
    // A sleep.
    wg.add(1);
    goro::go([&] {
      goro::sleep(std::chrono::milliseconds(2));
      wg.done();
    });
    // A contended mutex: the holder waits until the others are parked on
    // it (goro::stats' wait reasons; bounded), then lets them in.
    goro::mutex mu;
    int counter = 0;
    mu.lock();
    for (int i = 0; i < 3; i++) {
      wg.add(1);
      goro::go([&] {
        mu.lock();
        counter++;
        mu.unlock();
        wg.done();
      });
    }
    auto parked_on_mu = [] {
      for (auto& [reason, n] : goro::stats().waiting_by_reason)
        if (reason == "sync.Mutex.Lock") return n;
      return std::int64_t(0);
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (parked_on_mu() < 3 && std::chrono::steady_clock::now() < deadline)
      goro::sleep(std::chrono::microseconds(200));
    mu.unlock();
    wg.wait();
    EXPECT_EQ(counter, 3);
    goro::trace::stop();
    EXPECT_FALSE(goro::trace::active());
    return 0;
  });
  auto st = goro::trace::last_stats();
  EXPECT_GT(st.events, 100u);
  EXPECT_EQ(st.dropped, 0u);

  json doc = read_json(path);
  const auto& evs = check_wellformed(doc);

  std::set<double> ran, named_ok, spawned;
  std::set<std::string> reasons;
  std::map<double, double> parent_of;
  bool unpark_by_partner = false;
  bool p_track = false, m_track = false;
  for (const json& e : evs) {
    std::string ph = field(e, "ph"), cat = field(e, "cat"),
                name = field(e, "name");
    if (ph == "M" && name == "thread_name") {
      std::string n = sarg(e, "name");
      if (!n.empty() && n[0] == 'P') p_track = true;
      if (!n.empty() && n[0] == 'M') m_track = true;
    }
    if (ph == "B" && cat == "goroutine") {
      double g = narg(e, "goid");
      ran.insert(g);
      std::string fn = sarg(e, "function");
      // The user's lambda, named through goro's spawn plumbing, or (for
      // the main goroutine) goro::run's own.
      if (!fn.empty() && fn != "goroutine" &&
          fn.find("goro::detail::closure") == std::string::npos)
        named_ok.insert(g);
      else
        ADD_FAILURE() << "badly named goroutine " << g << ": '" << fn << "'";
      if (g == double(pinger)) {
        EXPECT_NE(fn.find("TestBody"), std::string::npos) << fn;
      }
    }
    if (ph == "i" && cat == "spawn") {
      ASSERT_GE(narg(e, "parent"), 0) << "spawn without a parent field";
      spawned.insert(narg(e, "goid"));
      parent_of[narg(e, "goid")] = narg(e, "parent");
    }
    if (ph == "i" && cat == "park") {
      EXPECT_FALSE(sarg(e, "reason").empty());
      reasons.insert(sarg(e, "reason"));
    }
    if (ph == "i" && cat == "unpark") {
      EXPECT_GE(narg(e, "waker"), 0) << "unpark without a waker";
      EXPECT_FALSE(sarg(e, "waker_name").empty());
      double g = narg(e, "goid"), w = narg(e, "waker");
      if ((g == double(pinger) && w == double(ponger)) ||
          (g == double(ponger) && w == double(pinger)))
        unpark_by_partner = true;
    }
  }
  EXPECT_TRUE(p_track);
  EXPECT_TRUE(m_track);
  EXPECT_EQ(ran, named_ok);
  EXPECT_TRUE(ran.count(double(pinger)) && ran.count(double(ponger)));
  // Six goroutines spawned by main while tracing, each naming it.
  EXPECT_EQ(spawned.size(), 6u);
  for (auto& [child, parent] : parent_of)
    EXPECT_EQ(parent, double(main_goid)) << "child " << child;
  EXPECT_TRUE(unpark_by_partner);
  std::string all;
  for (auto& r : reasons) all += "[" + r + "] ";
  // Unbuffered ping-pong: each round one side parks, on send or receive.
  EXPECT_TRUE(reasons.count("chan receive") || reasons.count("chan send"))
      << all;
  EXPECT_TRUE(reasons.count("sleep"));
  EXPECT_TRUE(reasons.count("sync.Mutex.Lock"));
  EXPECT_TRUE(reasons.count("sync.WaitGroup.Wait"));
  std::remove(path.c_str());
}

TEST(Trace, BlockingCallsAndHandoffsAreRecorded) {
  std::string path = tmp_path("sys.json");
  json doc = traced_run(path, 2, [&] {
    goro::wait_group wg;
    for (int i = 0; i < 2; i++) {
      wg.add(1);
      goro::go([&] {
        // A call long enough for sysmon to hand the P off (>= 20 us).
        goro::blocking([] { ::usleep(30 * 1000); });
        {
          goro::blocking_scope b(/*long_call=*/true);  // handed off at once
          ::usleep(1000);
        }
        wg.done();
      });
    }
    wg.wait();
  });
  const auto& evs = check_wellformed(doc);
  int syscalls = 0, handoffs = 0, blocks = 0;
  for (const json& e : evs) {
    if (field(e, "ph") == "B" && field(e, "cat") == "syscall") syscalls++;
    if (field(e, "ph") == "i" && field(e, "name").rfind("handoff", 0) == 0)
      handoffs++;
    if (field(e, "ph") == "i" &&
        field(e, "name").rfind("blocking call", 0) == 0)
      blocks++;
  }
  EXPECT_GE(syscalls, 4);
  EXPECT_GE(blocks, 2);
  EXPECT_GE(handoffs, 2);
  std::remove(path.c_str());
}

// The compact records carry time as steps from the P's previous timed
// record (one word), a long gap or an idle P as a full time (two words),
// and a park takes the time of the next start on its P: the spans seen in
// the trace must be the spans the program measured with its own clock.
// GORO_TRACE_EXACT set for one scope (read when a trace starts).
struct exact_clock {
  explicit exact_clock(const char* v) { ::setenv("GORO_TRACE_EXACT", v, 1); }
  ~exact_clock() { ::unsetenv("GORO_TRACE_EXACT"); }
};

// With GORO_TRACE_EXACT=1 every timed record reads the clock: the slices'
// ends are the clock's, to the rounding (bursts are tested below).
TEST(Trace, TimesFollowTheClock) {
  exact_clock exact("1");
  std::string path = tmp_path("times.json");
  // Spins of 2 ms (the next record's time step fits one word) and 20 ms
  // (it does not: a two-word record).
  const int spin_ms[2] = {2, 20};
  std::uint64_t spinner[2] = {0, 0}, sleeper = 0;
  double spun_ms[2] = {0, 0};
  json doc = traced_run(path, 1, [&] {
    goro::wait_group wg;
    wg.add(4);
    // Many short slices: one-word records with small time steps.
    goro::go([&] {
      for (int i = 0; i < 2000; i++) goro::gosched();
      wg.done();
    });
    // Long slices: no switch while they spin.
    for (int k = 0; k < 2; k++) {
      goro::go([&, k] {
        spinner[k] = goro::goroutine_id();
        auto t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 <
               std::chrono::milliseconds(spin_ms[k])) {
        }
        spun_ms[k] = std::chrono::duration<double, std::milli>(
                         std::chrono::steady_clock::now() - t0)
                         .count();
        wg.done();
      });
    }
    // A sleep: the P goes idle, then a long time step.
    goro::go([&] {
      sleeper = goro::goroutine_id();
      goro::sleep(std::chrono::milliseconds(30));
      wg.done();
    });
    wg.wait();
  });
  const auto& evs = check_wellformed(doc);
  // Each spinner's slices on the P track: first begin to last end.
  double first_b[2] = {-1, -1}, last_e[2] = {-1, -1};
  int open = -1;
  double sleep_park = -1, wake_b = -1;
  on_p_tracks(evs, [&](const std::string& ph, const json& e, double ts) {
    if (ph == "B") {
      open = -1;
      for (int k = 0; k < 2; k++)
        if (narg(e, "goid") == double(spinner[k])) {
          if (first_b[k] < 0) first_b[k] = ts;
          open = k;
        }
    } else if (ph == "E" && open >= 0) {
      last_e[open] = ts;
      open = -1;
    }
    if (ph == "i" && field(e, "cat") == "park" &&
        narg(e, "goid") == double(sleeper))
      sleep_park = ts;
    if (ph == "B" && narg(e, "goid") == double(sleeper) && sleep_park >= 0 &&
        wake_b < 0)
      wake_b = ts;
  });
  for (int k = 0; k < 2; k++) {
    ASSERT_GE(first_b[k], 0) << "no slice of the " << spin_ms[k] << " ms spin";
    ASSERT_GE(last_e[k], first_b[k]);
    // The trace's clock and the program's agree: the spin is measured
    // inside the slice, so the slice is at least as long (less 50 us of
    // rounding) and, with nothing else to run meanwhile but yields, not
    // twice as long.
    // Under TSan a goroutine's first run costs a few milliseconds more
    // (its fiber's set-up: 6-7 ms on the 2-vCPU VM, at 5b10399 too).
    double span_us = last_e[k] - first_b[k];
    EXPECT_GE(span_us, spun_ms[k] * 1000 - 50) << spin_ms[k] << " ms spin";
    EXPECT_LE(span_us,
              spun_ms[k] * 2000 + goro_test::scaled(1000.0, 1000.0, 15000.0))
        << spin_ms[k] << " ms spin";
  }
  ASSERT_GE(sleep_park, 0) << "no park of the sleeping goroutine";
  ASSERT_GE(wake_b, 0) << "the sleeping goroutine never ran again";
  // A park takes the time of the next start on its P (trace.hpp): the gap
  // is the sleep less the switch after the park, a few microseconds, but
  // up to a few hundred under the sanitizers.
  EXPECT_GE(wake_b - sleep_park, 30 * 1000 - (GORO_TEST_SANITIZED ? 500 : 50));
  EXPECT_EQ(goro::trace::last_stats().interpolated, 0u);
  const json* other = doc.get("otherData");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(narg_of(*other, "interpolated"), 0);
  std::remove(path.c_str());
}

// By default, dense bursts of switches skip the clock and the decoder
// interpolates their times (trace.hpp, "Interpolated records"). A burst of
// yields is interpolated (most of its records) and its slices still nest
// and follow each other on the P's track; a spin inside the burst that
// lasts past a sysmon round (the spinner waits for trace_epoch to move) is
// closed by a clock read, so its slice is as long as the spin although the
// slice's start was written without a time.
TEST(Trace, BurstsAreInterpolatedAndLongSlicesKeepTheirLength) {
  exact_clock exact("0");
  // Dense at any speed: sanitized builds switch too slowly for the
  // default threshold (the mechanism, not the tuning, is tested here).
  struct dense_guard {
    std::uint64_t saved = goro::rt::trace_dense_ticks;
    dense_guard() { goro::rt::trace_dense_ticks = std::uint64_t(1) << 16; }
    ~dense_guard() { goro::rt::trace_dense_ticks = saved; }
  } dense;
  std::string path = tmp_path("burst.json");
#if GORO_TEST_SANITIZED
  constexpr int yields = 4000;
#else
  constexpr int yields = 20000;
#endif
  std::uint64_t spinner = 0;
  double spun_us = 0;
  json doc = traced_run(path, 1, [&] {
    goro::wait_group wg;
    wg.add(3);
    std::atomic<int> done{0};
    for (int k = 0; k < 2; k++) {
      goro::go([&] {
        for (int i = 0; i < yields; i++) {
          done.fetch_add(1, std::memory_order_relaxed);
          goro::gosched();
        }
        wg.done();
      });
    }
    goro::go([&] {
      // Start inside the burst.
      while (done.load(std::memory_order_relaxed) < yields / 2) goro::gosched();
      spinner = goro::goroutine_id();
      auto t0 = std::chrono::steady_clock::now();
      {
        // One slice for the whole spin (no preemption splits it).
        goro::preempt_guard guard;
        std::uint32_t e0 =
            goro::rt::trace_epoch.load(std::memory_order_relaxed);
        // 5 ms and two sysmon ticks (sysmon ticks at least every
        // millisecond while tracing; the deadline keeps a broken sysmon
        // from hanging the test).
        while (
            std::chrono::steady_clock::now() - t0 <
                std::chrono::milliseconds(5) ||
            (goro::rt::trace_epoch.load(std::memory_order_relaxed) - e0 < 2 &&
             std::chrono::steady_clock::now() - t0 <
                 std::chrono::seconds(20))) {
        }
        spun_us = std::chrono::duration<double, std::micro>(
                      std::chrono::steady_clock::now() - t0)
                      .count();
      }
      wg.done();
    });
    wg.wait();
  });
  const auto& evs = check_wellformed(doc);
  auto st = goro::trace::last_stats();
  EXPECT_GT(st.interpolated, std::uint64_t(yields))
      << "of " << st.events << " events";
  const json* other = doc.get("otherData");
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(narg_of(*other, "interpolated"), double(st.interpolated));
  // The spinner's longest slice on the P track.
  double longest = 0, begin = -1;
  on_p_tracks(evs, [&](const std::string& ph, const json& e, double ts) {
    if (ph == "B")
      begin = narg(e, "goid") == double(spinner) ? ts : -1;
    else if (ph == "E" && begin >= 0) {
      longest = std::max(longest, ts - begin);
      begin = -1;
    }
  });
  ASSERT_GT(spinner, 0u);
  ASSERT_GE(spun_us, 5000);
  // At least the spin, less 50 us of rounding and the interpolated start's
  // error: at most a window of 33 units at the raised threshold (65536
  // ticks each, 65.5 us at 1 GHz or more: about 2.2 ms, against a spin of
  // 5 ms or more); without sysmon ending the burst the slice is drawn a
  // few microseconds long.
  EXPECT_GE(longest, spun_us - 50 - 33 * 65.536);
  std::remove(path.c_str());
}

// Traces started and stopped again while goroutines churn on two Ps: each
// file is complete on its own. The decoder carries the M and the running
// goroutine along each P's stream; a restart must not leak one trace's
// state into the next (a goroutine slice on no thread's track, an unpark
// with a waker the stream did not run).
TEST(Trace, RestartsWhileBusyGiveCompleteFiles) {
  constexpr int cycles = 4;
  std::vector<std::string> paths;
  for (int i = 0; i < cycles; i++)
    paths.push_back(tmp_path(("cycle" + std::to_string(i) + ".json").c_str()));
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [&] {
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    auto ping = goro::make_chan<int>(), pong = goro::make_chan<int>();
    wg.add(3);
    goro::go([&] {  // ping-pong: unparks with a waker, parks
      while (!stop.load()) {
        ping.send(1);
        (void)pong.recv();
        goro::sleep(std::chrono::microseconds(50));  // files stay small
      }
      ping.close();
      wg.done();
    });
    goro::go([&] {
      while (auto v = ping.recv()) pong.send(*v);
      wg.done();
    });
    goro::go([&] {  // spawns, sleeps and blocking calls
      while (!stop.load()) {
        goro::wait_group inner;
        inner.add(4);
        for (int k = 0; k < 4; k++) goro::go([&] { inner.done(); });
        inner.wait();
        goro::blocking([] { ::usleep(200); });
        goro::sleep(std::chrono::microseconds(300));
      }
      wg.done();
    });
    for (int i = 0; i < cycles; i++) {
      goro::trace::start(paths[i]);
      goro::sleep(std::chrono::milliseconds(15));
      goro::trace::stop();
      goro::sleep(std::chrono::milliseconds(2));
    }
    stop.store(true);
    wg.wait();
    return 0;
  });
  for (int i = 0; i < cycles; i++) {
    SCOPED_TRACE(paths[i]);
    json doc = read_json(paths[i]);
    const auto& evs = check_wellformed(doc);
    int p_slices = 0, m_slices = 0, unparks = 0;
    for (const json& e : evs) {
      std::string ph = field(e, "ph"), cat = field(e, "cat");
      const json* pid = e.get("pid");
      if (ph == "B" && cat == "goroutine" && pid) {
        (pid->num == 1 ? p_slices : m_slices)++;
        // A goroutine slice on a thread's track is on an M's, never on
        // the plain threads' track (tid 1000000).
        if (pid->num == 2) {
          EXPECT_LT(e.get("tid")->num, 1000000);
        }
        EXPECT_FALSE(sarg(e, "function").empty());
      }
      if (ph == "i" && cat == "unpark") {
        unparks++;
        EXPECT_GE(narg(e, "waker"), 0);
      }
    }
    // Every slice on a P's track has its twin on the thread's.
    EXPECT_GT(p_slices, 0);
    EXPECT_EQ(p_slices, m_slices);
    EXPECT_GT(unparks, 0);
    std::remove(paths[i].c_str());
  }
}

TEST(Trace, BadUseThrows) {
  EXPECT_THROW(goro::trace::stop(), std::logic_error);
  EXPECT_THROW(goro::trace::start("/nonexistent-dir/x/trace.json"),
               std::system_error);
  EXPECT_FALSE(goro::trace::active());
  std::string path = tmp_path("twice.json");
  goro::trace::start(path);
  EXPECT_THROW(goro::trace::start(tmp_path("other.json")), std::logic_error);
  goro::trace::stop();
  EXPECT_THROW(goro::trace::stop(), std::logic_error);
  // The first trace is intact; a second one can be taken.
  EXPECT_NO_THROW(check_wellformed(read_json(path)));
  goro::trace::start(path);
  goro::trace::stop();
  EXPECT_NO_THROW(check_wellformed(read_json(path)));
  std::remove(path.c_str());
}

// Most goroutine records are one 4-byte unit holding the goid as a 16-bit
// difference from the P's previous goroutine record. Two goroutines whose
// goids are more than 2^15 apart take the two-unit form at every
// alternation, and goids close together the short one: the decoder must
// follow both (a wrong chain shows up as slices and unparks of goroutines
// that never existed).
TEST(Trace, GoidsFarApartAndCloseTogetherDecode) {
  exact_clock exact("0");
  std::string path = tmp_path("goids.json");
  constexpr int rounds = 300;
  std::uint64_t main_goid = 0, far = 0, near = 0;
  json doc = traced_run(path, 1, [&] {
    main_goid = goro::goroutine_id();
    goro::trace::stop();  // the goids below are spent without tracing
    {
      goro::wait_group burn;
      for (int i = 0; i < 40000; i++) {
        burn.add(1);
        goro::go([&] { burn.done(); });
      }
      burn.wait();
    }
    goro::trace::start(path);
    auto to_far = goro::make_chan<int>(), to_near = goro::make_chan<int>(),
         back = goro::make_chan<int>();
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      far = goro::goroutine_id();
      for (int i = 0; i < rounds; i++) back.send(to_far.recv().value());
      wg.done();
    });
    goro::go([&] {
      near = goro::goroutine_id();
      for (int i = 0; i < rounds; i++) back.send(to_near.recv().value());
      wg.done();
    });
    for (int i = 0; i < rounds; i++) {
      to_far.send(i);
      EXPECT_EQ(back.recv().value(), i);
      to_near.send(i);
      EXPECT_EQ(back.recv().value(), i);
    }
    wg.wait();
  });
  ASSERT_GT(far, main_goid + 40000);
  ASSERT_GT(near, far);
  ASSERT_LT(near - far, 1000u);
  const auto& evs = check_wellformed(doc);
  std::set<double> known = {double(main_goid), double(far), double(near)};
  std::map<double, int> slices, unparks, parks;
  for (const json& e : evs) {
    std::string ph = field(e, "ph"), cat = field(e, "cat");
    if (ph == "i" && cat == "park") {
      // Folded into the next start or into the unit that woke the next
      // goroutine: a park lost there is missing here.
      double g = narg(e, "goid");
      EXPECT_TRUE(known.count(g)) << "a park of goroutine " << g;
      std::string r = sarg(e, "reason");
      EXPECT_TRUE(r == "chan receive" || r == "chan send" ||
                  r == "sync.WaitGroup.Wait")
          << r;
      parks[g]++;
    }
    if (ph == "B" && cat == "goroutine") {
      double g = narg(e, "goid");
      EXPECT_TRUE(known.count(g)) << "a slice of goroutine " << g;
      slices[g]++;
    }
    if (ph == "i" && cat == "unpark") {
      double g = narg(e, "goid"), w = narg(e, "waker");
      EXPECT_TRUE(known.count(g)) << "an unpark of goroutine " << g;
      EXPECT_TRUE(known.count(w)) << "an unpark by goroutine " << w;
      unparks[g]++;
    }
  }
  // Every round parks each side once at least.
  EXPECT_GE(slices[double(far)], rounds);
  EXPECT_GE(slices[double(near)], rounds);
  EXPECT_GE(slices[double(main_goid)], rounds);
  EXPECT_GE(unparks[double(far)], rounds);
  EXPECT_GE(unparks[double(near)], rounds);
  EXPECT_GE(parks[double(far)], rounds);
  EXPECT_GE(parks[double(near)], rounds);
  EXPECT_GE(parks[double(main_goid)], 2 * rounds);
  std::remove(path.c_str());
}

// A goroutine's exit is written with the P's next record: folded into the
// next go_start (a spawn chain's switch is one 4-byte record) or, when the
// P finds nothing to run, before its proc_stop. Either way its slice ends
// where it exited: each link of a chain before the next begins, and the
// last one right away, not when the P runs again 30 ms later.
struct chain_state {
  std::vector<std::uint64_t> ids;
  std::atomic<bool> done{false};  // the last link's last store
  goro::wait_group wg;
};
void chain_link(int n, chain_state* st) {
  st->ids.push_back(goro::goroutine_id());
  if (n > 1) {
    goro::go(chain_link, n - 1, st);
    return;
  }
  st->done.store(true);
  st->wg.done();
}

TEST(Trace, ExitsEndTheirSlicesWhereTheyHappen) {
  exact_clock exact("0");
  std::string path = tmp_path("exits.json");
  constexpr int links = 100;
  chain_state st;
  st.ids.reserve(links);
  st.wg.add(1);
  std::uint64_t main_goid = 0;
  bool ran_before_wake = false;
  json doc = traced_run(path, 1, [&] {
    main_goid = goro::goroutine_id();
    goro::go(chain_link, links, &st);
    // The chain runs while main sleeps (P=1), then the P is idle: the gap
    // whose start the last exit must mark. The wait_group, not the sleep,
    // says the chain is over.
    goro::sleep(std::chrono::milliseconds(30));
    ran_before_wake = st.done.load();
    st.wg.wait();
  });
  const std::vector<std::uint64_t>& ids = st.ids;
  ASSERT_EQ(ids.size(), std::size_t(links));
  if (!ran_before_wake)
    GTEST_SKIP() << "the chain took more than 30 ms: no idle gap to check";
  const auto& evs = check_wellformed(doc);
  std::map<double, int> link_of;
  for (int i = 0; i < links; i++) link_of[double(ids[i])] = i;
  std::vector<double> begin(links, -1), end(links, -1);
  double main_after = -1;  // main's first slice after the chain began
  int open = -1;
  on_p_tracks(evs, [&](const std::string& ph, const json& e, double ts) {
    if (ph == "B") {
      double g = narg(e, "goid");
      auto it = link_of.find(g);
      open = it == link_of.end() ? -1 : it->second;
      if (open >= 0 && begin[open] < 0) begin[open] = ts;
      if (g == double(main_goid) && begin[0] >= 0 && main_after < 0)
        main_after = ts;
    } else if (ph == "E" && open >= 0) {
      end[open] = ts;
      open = -1;
    }
  });
  for (int i = 0; i < links; i++) {
    ASSERT_GE(begin[i], 0) << "no slice of link " << i;
    ASSERT_GE(end[i], begin[i]) << "link " << i;
    if (i + 1 < links) {
      EXPECT_LE(end[i], begin[i + 1]) << "link " << i;
    }
  }
  ASSERT_GE(main_after, 0) << "main never ran after the chain";
  // The last exit is written before the P stops, not with main's wake-up
  // (30 ms after main slept; the chain takes well under 10 ms).
  EXPECT_LT(end[links - 1], main_after - 10 * 1000)
      << "the last link's slice ends with main's next one";
  std::remove(path.c_str());
}

TEST(Trace, BufferCapDropsAndCounts) {
  // 1 MiB: 16 chunks of 64 KiB (8192 8-byte records: with every event
  // timed, each start is one); far more events than fit.
  exact_clock exact("1");
  ::setenv("GORO_TRACE_BUFFER", "1", 1);
  std::string path = tmp_path("cap.json");
  goro::run([&] {
    goro::trace::start(path);
    // At least one record per yield: 160000 still overflow the 131072
    // records that fit (TSan takes about 0.1 ms a yield).
    const int yields = goro_test::scaled(300000, 160000);
    for (int i = 0; i < yields; i++) goro::gosched();
    goro::trace::stop();
    return 0;
  });
  ::unsetenv("GORO_TRACE_BUFFER");
  auto st = goro::trace::last_stats();
  EXPECT_GT(st.dropped, 0u);
  EXPECT_LE(st.events, 16u * 8192u);
#if GORO_TEST_SANITIZED
  // The file is about 70 MB of JSON, which this test's parser takes most of
  // a minute to read under TSan: the sanitizers check the recording and
  // dropping; the file's form is checked by the other builds.
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  const std::string text = ss.str();
  const std::string key = "\"dropped\":";
  const std::size_t at = text.rfind(key);
  ASSERT_NE(at, std::string::npos);
  EXPECT_EQ(std::strtoull(text.c_str() + at + key.size(), nullptr, 10),
            st.dropped);
#else
  json doc = read_json(path);
  check_wellformed(doc);
  const json* other = doc.get("otherData");
  ASSERT_NE(other, nullptr);
  ASSERT_NE(other->get("dropped"), nullptr);
  EXPECT_EQ(other->get("dropped")->num, double(st.dropped));
#endif
  std::remove(path.c_str());
}

TEST(TraceDeathTest, GoroTraceEnvWritesAtRunReturn) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // The child is this binary run again (threadsafe style), with another
  // pid: it finds the path in the environment the parent set.
  const char* inherited = std::getenv("GORO_TRACE_TEST_PATH");
  std::string path = inherited ? inherited : tmp_path("env.json");
  ::setenv("GORO_TRACE_TEST_PATH", path.c_str(), 1);
  if (!inherited) std::remove(path.c_str());
  // The child starts the runtime with GORO_TRACE set; the file must be
  // complete when goro::run returns, before exit.
  EXPECT_EXIT(
      {
        ::setenv("GORO_TRACE", path.c_str(), 1);
        goro::run([] {
          auto c = goro::make_chan<int>();
          goro::go([&] { c.send(1); });
          (void)c.recv();
          return 0;
        });
        std::ifstream in(path);
        std::stringstream ss;
        ss << in.rdbuf();
        std::string text = ss.str();
        json_parser p{text};
        json doc = p.parse();
        std::_Exit(doc.get("traceEvents") && !goro::trace::active() ? 0 : 3);
      },
      testing::ExitedWithCode(0), "");
  json doc = read_json(path);
  const auto& evs = check_wellformed(doc);
  int slices = 0;
  for (const json& e : evs)
    if (field(e, "ph") == "B") slices++;
  EXPECT_GE(slices, 2);
  std::remove(path.c_str());
}

// ---------------------------------------------------------------------------
// goro_tracesvg

// Well-formed XML (no DTD): balanced tags, quoted attributes, known
// entities, one root. Returns the element names in document order, with
// their class attribute ("g.lane p-lane").
[[maybe_unused]] std::vector<std::string> check_xml(const std::string& x) {
  std::vector<std::string> out, stack;
  std::size_t i = 0;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("XML: " + why + " at offset " + std::to_string(i));
  };
  auto is_name = [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' ||
           c == '_' || c == ':' || c == '.';
  };
  int roots = 0;
  while (i < x.size()) {
    if (x[i] != '<') {
      if (x[i] == '&') {
        std::size_t semi = x.find(';', i);
        if (semi == std::string::npos) fail("bad entity");
        std::string ent = x.substr(i + 1, semi - i - 1);
        if (ent != "amp" && ent != "lt" && ent != "gt" && ent != "quot" &&
            ent != "apos" && (ent.empty() || ent[0] != '#'))
          fail("unknown entity " + ent);
      }
      if (stack.empty() && !std::isspace(static_cast<unsigned char>(x[i])))
        fail("text outside the root");
      i++;
      continue;
    }
    if (x.compare(i, 5, "<?xml") == 0) {
      std::size_t e = x.find("?>", i);
      if (e == std::string::npos || i != 0) fail("bad declaration");
      i = e + 2;
      continue;
    }
    if (x.compare(i, 2, "</") == 0) {
      std::size_t e = x.find('>', i);
      if (e == std::string::npos) fail("unterminated end tag");
      std::string name = x.substr(i + 2, e - i - 2);
      if (stack.empty() || stack.back() != name) fail("mismatched </" + name);
      stack.pop_back();
      i = e + 1;
      continue;
    }
    i++;
    std::size_t n0 = i;
    while (i < x.size() && is_name(x[i])) i++;
    std::string name = x.substr(n0, i - n0);
    if (name.empty()) fail("empty tag name");
    std::string cls;
    while (true) {
      while (i < x.size() && std::isspace(static_cast<unsigned char>(x[i])))
        i++;
      if (i >= x.size()) fail("unterminated tag");
      if (x[i] == '>' || x.compare(i, 2, "/>") == 0) break;
      std::size_t a0 = i;
      while (i < x.size() && is_name(x[i])) i++;
      std::string attr = x.substr(a0, i - a0);
      if (attr.empty() || i >= x.size() || x[i] != '=' || i + 1 >= x.size() ||
          x[i + 1] != '"')
        fail("bad attribute in <" + name);
      std::size_t v = x.find('"', i + 2);
      if (v == std::string::npos) fail("unterminated attribute");
      std::string val = x.substr(i + 2, v - i - 2);
      if (val.find('<') != std::string::npos) fail("'<' in attribute");
      if (attr == "class") cls = val;
      i = v + 1;
    }
    if (stack.empty()) {
      if (++roots > 1) fail("two roots");
    }
    out.push_back(cls.empty() ? name : name + "." + cls);
    if (x[i] == '>') {
      stack.push_back(name);
      i++;
    } else {
      i += 2;
    }
  }
  if (!stack.empty()) fail("unclosed <" + stack.back() + ">");
  if (roots != 1) fail("no root");
  return out;
}

[[maybe_unused]] std::string slurp(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// stop() writes the file as a blocking call: the P goes to other
// goroutines meanwhile. Here the file is a pipe that only a goroutine of
// the same program drains, at GOMAXPROCS 1; a writer that kept the only P
// would fill the pipe and wait forever (the child's watchdog then exits
// with 3).
TEST(TraceDeathTest, StopWritesWithoutHoldingItsP) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        goro_test::arm_child_watchdog(std::chrono::seconds(30));
        int fds[2];
        if (::pipe(fds) != 0) std::_Exit(5);
        goro::options opt;
        opt.gomaxprocs = 1;
        int rc = goro::run(opt, [&] {
          goro::trace::start("/proc/self/fd/" + std::to_string(fds[1]));
          // About 500 bytes of JSON per switch: far more than a pipe holds.
          for (int i = 0; i < 5000; i++) goro::gosched();
          std::size_t got = 0;
          goro::wait_group wg;
          wg.add(1);
          goro::go([&] {
            goro::fd r(fds[0]);
            char buf[1 << 14];
            while (std::size_t n = r.read(buf, sizeof buf)) got += n;
            wg.done();
          });
          goro::trace::stop();
          ::close(fds[1]);  // the reader sees the end of the stream
          wg.wait();
          return got > 1000000 ? 0 : 4;
        });
        std::_Exit(rc);
      },
      testing::ExitedWithCode(0), "");
}

TEST(TraceSvg, RendersOneLanePerP) {
#ifndef GORO_TRACESVG
  GTEST_SKIP() << "goro_tracesvg not built";
#else
  // scripts/check_trace_svg.sh keeps the files to open them in Chromium.
  const char* keep = std::getenv("GORO_TRACE_KEEP_DIR");
  std::string trace =
      keep ? std::string(keep) + "/trace.json" : tmp_path("svg.json");
  std::string svg =
      keep ? std::string(keep) + "/trace.svg" : tmp_path("svg.svg");
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [&] {
    goro::gomaxprocs(2);
    goro::trace::start(trace);
    goro::wait_group wg;
    // Work for both Ps: goroutines that compute and yield now and then.
    std::atomic<std::uint64_t> sink{0};
    for (int g = 0; g < 8; g++) {
      wg.add(1);
      goro::go([&, g] {
        std::uint64_t x = std::uint64_t(g) + 1;
        for (int round = 0; round < 20; round++) {
          for (int k = 0; k < 20000; k++) x = x * 6364136223846793005ULL + 1;
          goro::gosched();
        }
        sink += x;
        wg.done();
      });
    }
    auto c = goro::make_chan<int>();
    wg.add(1);
    goro::go([&] {
      for (int i = 0; i < 20; i++) c.send(i);
      wg.done();
    });
    for (int i = 0; i < 20; i++) (void)c.recv();
    wg.wait();
    goro::trace::stop();
    return 0;
  });
  std::string cmd = std::string(GORO_TRACESVG) + " " + trace + " " + svg;
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;

  // The P tracks the trace has.
  int ptracks = 0;
  json doc = read_json(trace);
  for (const json& e : check_wellformed(doc))
    if (field(e, "ph") == "M" && field(e, "name") == "thread_name" &&
        sarg(e, "name").rfind("P", 0) == 0)
      ptracks++;
  ASSERT_GE(ptracks, 1);

  std::string x = slurp(svg);
  std::vector<std::string> elems = check_xml(x);
  ASSERT_FALSE(elems.empty());
  EXPECT_EQ(elems[0], "svg");
  int plane = 0, rects = 0, axis = 0;
  for (const std::string& e : elems) {
    if (e == "g.lane p-lane") plane++;
    if (e == "rect") rects++;
    if (e == "g.axis") axis++;
  }
  EXPECT_EQ(plane, ptracks);
  EXPECT_EQ(axis, 1);
  EXPECT_GT(rects, 10);
  // Slices carry the goroutines' names.
  EXPECT_NE(x.find("TestBody"), std::string::npos);
  if (!keep) {
    std::remove(trace.c_str());
    std::remove(svg.c_str());
  }
#endif
}

TEST(TraceSvg, BadInputIsRefused) {
#ifndef GORO_TRACESVG
  GTEST_SKIP() << "goro_tracesvg not built";
#else
  std::string bad = tmp_path("bad.json");
  {
    std::ofstream o(bad);
    o << "{\"traceEvents\": [ {\"ph\": ";
  }
  std::string out = tmp_path("bad.svg");
  std::string tool = GORO_TRACESVG;
  int rc = std::system((tool + " " + bad + " " + out + " 2>/dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << rc;
  rc = std::system((tool + " 2>/dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 2) << rc;
  rc = std::system(
      (tool + " /nonexistent.json " + out + " 2>/dev/null").c_str());
  EXPECT_TRUE(WIFEXITED(rc) && WEXITSTATUS(rc) == 1) << rc;
  std::remove(bad.c_str());
  std::remove(out.c_str());
#endif
}

}  // namespace
