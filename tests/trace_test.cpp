// Execution trace (goro::trace, GORO_TRACE): a small program's trace is
// valid JSON in Chrome's Trace Event format, its begin/end events pair up
// per track, every goroutine that ran is named after its function, spawns
// name their parent, unparks their waker, parks their wait reason; the API
// refuses bad use with the documented exceptions.
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <goro/chan.hpp>
#include <goro/goro.hpp>
#include <goro/runtime.hpp>
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
  std::vector<std::pair<std::string, json>> obj;

  const json* get(const std::string& k) const {
    for (auto& [key, v] : obj)
      if (key == k) return &v;
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
        v.obj.emplace_back(k, parse_value());
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
    // A contended mutex: the holder sleeps while the others wait.
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
    goro::sleep(std::chrono::milliseconds(3));
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
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [&] {
    goro::trace::start(path);
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
    goro::trace::stop();
    return 0;
  });
  json doc = read_json(path);
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

TEST(Trace, BufferCapDropsAndCounts) {
  // 1 MiB: 16 chunks of 64 KiB; far more events than fit.
  ::setenv("GORO_TRACE_BUFFER", "1", 1);
  std::string path = tmp_path("cap.json");
  goro::run([&] {
    goro::trace::start(path);
    for (int i = 0; i < 100000; i++) goro::gosched();
    goro::trace::stop();
    return 0;
  });
  ::unsetenv("GORO_TRACE_BUFFER");
  auto st = goro::trace::last_stats();
  EXPECT_GT(st.dropped, 0u);
  EXPECT_LE(st.events, 16u * 2048u);
  json doc = read_json(path);
  check_wellformed(doc);
  const json* other = doc.get("otherData");
  ASSERT_NE(other, nullptr);
  ASSERT_NE(other->get("dropped"), nullptr);
  EXPECT_EQ(other->get("dropped")->num, double(st.dropped));
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

}  // namespace
