// gdb_target: the program tests/gdb_test.sh debugs with the gdb extension
// (tools/gdb/goro-gdb.py). Its goroutines park on a channel, a goro::mutex,
// a sleep and a select, each in a function with a distinctive name, and one
// more spins in a call-free loop; once the runtime's own dump shows the
// four parked, it prints their ids ("gdb_target ready chan=N mutex=N
// sleep=N select=N loop=N main=N") and stops
// itself with SIGSTOP, where gdb (which runs it) takes over; continued,
// it wakes the goroutines it can and exits 0. Run without a debugger it
// stays stopped until SIGCONT, so gdb_test.sh always runs it under gdb.
#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <optional>
#include <string>

using namespace std::chrono_literals;

// Not inlined, so that each is a frame of its own in the backtrace; the
// empty asm after the blocking call keeps it from being a tail call.
__attribute__((noinline)) void gdb_target_parked_on_channel(
    goro::chan<int> ch) {
  auto v = ch.recv();
  asm volatile("" ::"r"(v.has_value()));
}

__attribute__((noinline)) void gdb_target_parked_on_mutex(goro::mutex* m) {
  m->lock();
  m->unlock();
  asm volatile("");
}

__attribute__((noinline)) void gdb_target_parked_in_sleep() {
  goro::sleep(1h);
  asm volatile("");
}

__attribute__((noinline)) void gdb_target_parked_in_select(goro::chan<int> a,
                                                           goro::chan<int> b) {
  std::optional<int> x, y;
  goro::select(goro::case_recv(a, x), goro::case_recv(b, y));
  asm volatile("" ::"r"(x.has_value()), "r"(y.has_value()));
}

// A call-free loop: running on its thread when the program stops, or
// just preempted (by signal) and runnable.
std::atomic<bool> gdb_target_stop_loop{false};
__attribute__((noinline)) void gdb_target_busy_loop(
    std::atomic<std::uint64_t>* started) {
  std::uint64_t x = 1;
  started->store(1);
  // The builtin, not std::atomic::load: an -O0 build calls that out of
  // line, and the preempted frame #0 would be the load.
  while (!__atomic_load_n(reinterpret_cast<bool*>(&gdb_target_stop_loop),
                          __ATOMIC_RELAXED)) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
#ifdef GORO_TSAN
    // No signal preemption under TSan: a call-free loop would keep the
    // world from stopping for goro::debug::stack(true).
    goro::gosched();
#endif
  }
  asm volatile("" ::"r"(x));
}

namespace {

bool contains(const std::string& s, const std::string& what) {
  return s.find(what) != std::string::npos;
}

// The dump's block for goroutine id shows `reason`.
bool parked(const std::string& dump, std::uint64_t id, const char* reason) {
  std::string head = "goroutine " + std::to_string(id) + " [" + reason + "]";
  return contains(dump, head);
}

}  // namespace

// The goroutines' ids, for the debugger's commands (gdb_test.sh runs
// `eval "goroutine %lu bt", (unsigned long)gdb_target_goid_chan`).
volatile std::uint64_t gdb_target_goid_chan, gdb_target_goid_mutex,
    gdb_target_goid_sleep, gdb_target_goid_select, gdb_target_goid_loop;

__attribute__((noinline)) int gdb_target_main() {
  auto ch = goro::make_chan<int>();
  auto a = goro::make_chan<int>(), b = goro::make_chan<int>();
  goro::mutex m;
  m.lock();
  std::atomic<std::uint64_t> cid{0}, mid{0}, sid{0}, xid{0};
  goro::go([&cid, ch] {
    cid = goro::goroutine_id();
    gdb_target_parked_on_channel(ch);
  });
  goro::go([&mid, &m] {
    mid = goro::goroutine_id();
    gdb_target_parked_on_mutex(&m);
  });
  goro::go([&sid] {
    sid = goro::goroutine_id();
    gdb_target_parked_in_sleep();
  });
  goro::go([&xid, a, b] {
    xid = goro::goroutine_id();
    gdb_target_parked_in_select(a, b);
  });
  std::atomic<std::uint64_t> lid{0}, loop_started{0};
  goro::go([&lid, &loop_started] {
    lid = goro::goroutine_id();
    gdb_target_busy_loop(&loop_started);
  });
  // Wait (bounded) until the runtime's own dump shows all four parked.
  auto until = std::chrono::steady_clock::now() + 20s;
  for (;;) {
    std::string dump = goro::debug::stack(true);
    if (cid && mid && sid && xid && loop_started &&
        parked(dump, cid, "chan receive") &&
        parked(dump, mid, "sync.Mutex.Lock") && parked(dump, sid, "sleep") &&
        parked(dump, xid, "select"))
      break;
    if (std::chrono::steady_clock::now() >= until) {
      std::fprintf(stderr, "gdb_target: goroutines did not park:\n%s\n",
                   dump.c_str());
      return 1;
    }
    goro::gosched();
  }
  gdb_target_goid_chan = cid;
  gdb_target_goid_mutex = mid;
  gdb_target_goid_sleep = sid;
  gdb_target_goid_select = xid;
  gdb_target_goid_loop = lid;
  std::printf(
      "gdb_target ready chan=%llu mutex=%llu sleep=%llu select=%llu "
      "loop=%llu main=%llu\n",
      static_cast<unsigned long long>(cid.load()),
      static_cast<unsigned long long>(mid.load()),
      static_cast<unsigned long long>(sid.load()),
      static_cast<unsigned long long>(xid.load()),
      static_cast<unsigned long long>(lid.load()),
      static_cast<unsigned long long>(goro::goroutine_id()));
  std::fflush(stdout);
  raise(SIGSTOP);
  // Continued: let everything finish (the sleeper is left to the exit).
  gdb_target_stop_loop = true;
  m.unlock();
  ch.send(1);
  a.send(2);
  return 0;
}

int main(int argc, char** argv) {
  // Two Ps, so that main runs beside the busy loop even where signal
  // preemption is off (TSan builds). With "1p", one: main then runs only
  // once the loop has been preempted by signal, so when the program stops
  // the loop is runnable with a signal-saved context.
  goro::options opt;
  opt.gomaxprocs = argc > 1 && std::string(argv[1]) == "1p" ? 1 : 2;
  int rc = goro::run(opt, [] { return gdb_target_main(); });
  std::_Exit(rc);
}
