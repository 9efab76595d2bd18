// trace.cpp: the execution tracer (Go's runtime/trace.go): event buffers,
// goro::trace::start/stop, GORO_TRACE, and the Chrome Trace Event writer.
//
// Buffers. One anonymous mapping of GORO_TRACE_BUFFER MiB (64 by default;
// MAP_NORESERVE, so only the pages written cost memory) is cut into 64 KiB
// chunks. A P takes the next chunk with one fetch_add when its current one
// is full: no allocation, no lock and no waiting on the recording path.
// Slot 0 of a chunk is its header (the owner's P id); a chunk's unused tail
// is the mapping's zero fill (trace_ev::none), which is where reading stops.
// When every chunk is taken, events are dropped and counted per buffer
// (reported in the file's metadata and by goro::trace::last_stats).
//
// Clock. The TSC (rdtsc, ~10 ns here against ~23 ns for CLOCK_MONOTONIC
// through the vDSO; CLOCK_MONOTONIC_COARSE is ~5 ns but ticks every 4 ms,
// useless for a timeline) where the CPU says it is constant and
// non-stopping, else CLOCK_MONOTONIC. Ticks become microseconds only when
// the file is written, from the TSC/nanotime pairs taken at start and stop.
//
// Consistency. start and stop stop the world: no P owner is then between
// its flag test and its write, and the P-less buffer is guarded by a spin
// lock that re-tests the flag. After stop restarts the world nothing
// writes the mapping any more, so it is read and written out with the
// world running. Goroutine names are symbolized then, not while recording.
#include "runtime/trace.hpp"

#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <goro/runtime.hpp>
#include <goro/trace.hpp>
#include <map>
#include <mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <unordered_map>
#include <vector>

#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/p.hpp"
#include "runtime/sched.hpp"
#include "runtime/stw.hpp"
#include "runtime/symtab.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

std::atomic<bool> trace_on{false};

namespace {

constexpr std::size_t chunk_bytes = 64 * 1024;
constexpr std::size_t chunk_events = chunk_bytes / sizeof(trace_event);
constexpr std::int32_t max_procs = 1024;  // allp's size (proc.cpp)

// The mapping and its chunk counter. Written under the world stop.
char* pool = nullptr;
std::size_t pool_bytes = 0;
std::uint32_t pool_chunks = 0;
std::atomic<std::uint32_t> pool_next{0};

// The buffer of threads without a P.
std::atomic<bool> noP_lock{false};
trace_cursor noP_cursor;

bool use_tsc = false;
std::uint64_t clock0 = 0, clock1 = 0;  // trace clock at start and stop
std::int64_t nano0 = 0, nano1 = 0;     // nanotime at start and stop

inline std::uint64_t trace_clock() {
  if (use_tsc) return __rdtsc();
  return std::uint64_t(nanotime());
}

bool tsc_usable() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 5, "flags") != 0) continue;
    auto has = [&](const char* f) {
      std::string w = std::string(" ") + f;
      std::size_t i = line.find(w);
      return i != std::string::npos &&
             (i + w.size() == line.size() || line[i + w.size()] == ' ');
    };
    return has("constant_tsc") && has("nonstop_tsc");
  }
  return false;
}

// A new chunk for `c`; false (and the event dropped) once none is left.
bool refill(trace_cursor& c, std::int16_t owner) {
  std::uint32_t i = pool_next.load(std::memory_order_relaxed);
  if (i < pool_chunks) i = pool_next.fetch_add(1, std::memory_order_relaxed);
  if (i >= pool_chunks) {
    c.pos = c.end = nullptr;
    return false;
  }
  auto* first = reinterpret_cast<trace_event*>(pool + i * chunk_bytes);
  first->p = owner;  // header: the chunk's owner
  c.pos = first + 1;
  c.end = first + chunk_events;
  return true;
}

inline void put(trace_cursor& c, std::int16_t owner, const trace_event& e) {
  if (c.pos == c.end && !refill(c, owner)) {
    c.dropped++;
    return;
  }
  *c.pos++ = e;
}

void lock_noP() {
  while (noP_lock.exchange(true, std::memory_order_acquire))
    while (noP_lock.load(std::memory_order_relaxed)) __builtin_ia32_pause();
}
void unlock_noP() { noP_lock.store(false, std::memory_order_release); }

// ts: the event's time, or 0 to read the clock now. (Not marked cold:
// while tracing, this is the hot path.)
void record(trace_ev type, std::uint64_t goid, std::uint64_t arg,
            std::uint8_t aux = 0, std::uint64_t ts = 0) {
  // Acquire: pairs with start's release store, so the mapping is seen.
  if (!trace_on.load(std::memory_order_acquire)) return;
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  trace_event e{ts ? ts : trace_clock(),
                goid,
                arg,
                mp ? std::uint32_t(mp->id) : UINT32_MAX,
                type,
                aux,
                std::int16_t(pp ? pp->id : -1)};
  if (pp != nullptr) {
    put(pp->trace, std::int16_t(pp->id), e);
    return;
  }
  lock_noP();
  if (trace_on.load(std::memory_order_relaxed)) put(noP_cursor, -1, e);
  unlock_noP();
}

std::uint64_t goid_of(G* gp) { return gp ? gp->goid : 0; }

}  // namespace

void trace_go_create_slow(G* gp, G* parent) {
  std::uint64_t ts = trace_clock();
  record(trace_ev::go_create, gp->goid, goid_of(parent), 0, ts);
  // The spawn site, for "created by" (a second record, same time).
  record(trace_ev::go_exists, gp->goid,
         reinterpret_cast<std::uintptr_t>(gp->gopc), 2, ts);
}
void trace_go_start_slow(G* gp) {
  record(trace_ev::go_start, gp->goid,
         reinterpret_cast<std::uintptr_t>(gp->entry));
}
void trace_go_park_slow(G* gp) {
  record(trace_ev::go_park, gp->goid, 0, std::uint8_t(gp->waitreason));
}
void trace_go_preempt_slow(G* gp, bool async) {
  record(trace_ev::go_preempt, gp->goid, 0, async ? 1 : 0);
}
void trace_go_end_slow(G* gp) { record(trace_ev::go_end, gp->goid, 0); }
void trace_go_unpark_slow(G* gp) {
  record(trace_ev::go_unpark, gp->goid, goid_of(getg()));
}
void trace_steal_slow(G* gp, P* victim) {
  record(trace_ev::steal, gp->goid, std::uint64_t(victim->id));
}
void trace_sys_enter_slow(G* gp) { record(trace_ev::sys_enter, gp->goid, 0); }
void trace_sys_exit_slow(G* gp, bool got_p) {
  record(trace_ev::sys_exit, gp->goid, 0, got_p ? 1 : 0);
}
void trace_sys_block_slow(G* gp) { record(trace_ev::sys_block, gp->goid, 0); }
void trace_handoff_slow(P* pp) {
  record(trace_ev::handoff, 0, std::uint64_t(pp->id));
}
void trace_preempt_req_slow(G* gp, P* pp) {
  record(trace_ev::preempt_req, gp->goid, std::uint64_t(pp->id));
}
void trace_netpoll_slow(G* first, std::int32_t n) {
  if (n == 0) return;
  record(trace_ev::netpoll, 0, std::uint64_t(n));
  // The poller is the waker (goid 0: the runtime).
  for (G* gp = first; gp != nullptr; gp = gp->schedlink)
    record(trace_ev::go_unpark, gp->goid, 0, 1);
}

namespace {

// ---------------------------------------------------------------------------
// Control: start, stop, GORO_TRACE.

std::mutex ctl_mu;  // start/stop/write, one at a time
std::string out_path;
std::FILE* out_file = nullptr;
bool env_started = false;
goro::trace::trace_stats last{};

std::size_t buffer_cap_bytes() {
  std::size_t mib = 64;
  if (const char* e = std::getenv("GORO_TRACE_BUFFER"); e && *e) {
    char* end = nullptr;
    unsigned long v = std::strtoul(e, &end, 10);
    if (end && *end == 0 && v >= 1 && v <= 65536) mib = v;
  }
  return mib << 20;
}

void map_pool() {
  pool_bytes = buffer_cap_bytes();
  void* m = mmap(nullptr, pool_bytes, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(),
                            "goro::trace: cannot map the trace buffer");
  pool = static_cast<char*>(m);
  // Huge pages where the kernel allows them (THP "madvise"): a recorder
  // then takes one page fault per 2 MiB (64K events) instead of one per
  // 4 KiB (128 events).
  madvise(pool, pool_bytes, MADV_HUGEPAGE);
  pool_chunks = std::uint32_t(pool_bytes / chunk_bytes);
  pool_next.store(0, std::memory_order_relaxed);
}

void each_p(void (*fn)(P*)) {
  for (std::int32_t i = 0; i < max_procs && allp[i] != nullptr; i++)
    fn(allp[i]);
}

// With the world stopped (or before any goroutine runs): empty cursors,
// the goroutines that exist, the clock's origin, then the flag.
void arm() {
  each_p([](P* pp) { pp->trace = trace_cursor{}; });
  noP_cursor = trace_cursor{};
  clock0 = trace_clock();
  nano0 = nanotime();
  // Names for goroutines that already exist (their go_start may come
  // before any go_create in this trace, or never). A G not dead has its
  // entry published (newproc_commit's release store of the status).
  forallg(
      [](G* gp, void*) {
        if (readgstatus(gp) == g_dead) return;
        trace_event e{clock0,
                      gp->goid,
                      reinterpret_cast<std::uintptr_t>(gp->entry),
                      0,
                      trace_ev::go_exists,
                      0,
                      -1};
        put(noP_cursor, -1, e);
        e.arg = reinterpret_cast<std::uintptr_t>(gp->gopc);
        e.aux = 2;
        put(noP_cursor, -1, e);
      },
      nullptr);
  // The caller itself, if a goroutine: it runs on its P from here on.
  M* mp = getm();
  if (G* gp = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr) {
    trace_event e{clock0,
                  gp->goid,
                  reinterpret_cast<std::uintptr_t>(gp->entry),
                  std::uint32_t(mp->id),
                  trace_ev::go_running,
                  0,
                  std::int16_t(mp->p ? mp->p->id : -1)};
    put(noP_cursor, -1, e);
  }
  trace_on.store(true, std::memory_order_release);
}

// With the world stopped: clear the flag, wait out a P-less recorder, sum
// the drops.
std::uint64_t disarm() {
  trace_on.store(false, std::memory_order_seq_cst);
  lock_noP();
  unlock_noP();
  std::uint64_t dropped = noP_cursor.dropped;
  for (std::int32_t i = 0; i < max_procs && allp[i] != nullptr; i++)
    dropped += allp[i]->trace.dropped;
  clock1 = trace_clock();
  nano1 = nanotime();
  return dropped;
}

void write_json(std::FILE* f, std::vector<trace_event>& evs,
                std::uint64_t dropped);

void finish(std::uint64_t dropped) {
  // At least 10 ms between the clock pairs, for the TSC's rate.
  if (use_tsc) {
    while (nanotime() - nano0 < 10'000'000) __builtin_ia32_pause();
    clock1 = trace_clock();
    nano1 = nanotime();
  }
  std::vector<trace_event> evs;
  std::uint32_t used = std::min(pool_next.load(), pool_chunks);
  for (std::uint32_t i = 0; i < used; i++) {
    auto* first = reinterpret_cast<trace_event*>(pool + i * chunk_bytes);
    for (std::size_t k = 1; k < chunk_events; k++) {
      if (first[k].type == trace_ev::none) break;
      evs.push_back(first[k]);
    }
  }
  munmap(pool, pool_bytes);
  pool = nullptr;
  std::FILE* f = out_file;
  out_file = nullptr;
  last.events = evs.size();
  last.dropped = dropped;
  write_json(f, evs, dropped);
  bool bad = std::ferror(f) != 0;
  if (std::fclose(f) != 0) bad = true;
  if (bad)
    throw std::system_error(errno ? errno : EIO, std::generic_category(),
                            "goro::trace::stop: cannot write " + out_path);
}

std::FILE* open_out(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr)
    throw std::system_error(errno, std::generic_category(),
                            "goro::trace::start: cannot open " + path);
  return f;
}

// ---------------------------------------------------------------------------
// The writer.

struct json_out {
  std::FILE* f;
  bool first = true;
  void begin_event() {
    std::fputs(first ? "\n" : ",\n", f);
    first = false;
  }
};

void put_string(std::FILE* f, const std::string& s) {
  std::fputc('"', f);
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      std::fputc('\\', f);
      std::fputc(c, f);
    } else if (c < 0x20) {
      std::fprintf(f, "\\u%04x", c);
    } else {
      std::fputc(c, f);
    }
  }
  std::fputc('"', f);
}

// The user's function inside goro's spawn plumbing:
// "goro::detail::closure<goro::detail::bind_call<F>(...)::{lambda()#1}>::
// entry(void*)" -> F.
std::string short_name(const std::string& fn) {
  const std::string key = "bind_call<";
  std::size_t i = fn.find(key);
  if (i == std::string::npos) {
    std::size_t paren = fn.find('(');
    return paren == std::string::npos || paren == 0 ? fn : fn.substr(0, paren);
  }
  i += key.size();
  int depth = 0;
  std::size_t j = i;
  for (; j < fn.size(); j++) {
    char c = fn[j];
    if (c == '<' || c == '(' || c == '{') depth++;
    if (c == '>' || c == ')' || c == '}') {
      if (depth == 0) break;
      depth--;
    }
    if (c == ',' && depth == 0) break;
  }
  std::string s = fn.substr(i, j - i);
  // A lambda inside a lambda: "f::{lambda()#1}::operator()() const::
  // {lambda()#2}" reads better as "f::{lambda()#1}::{lambda()#2}".
  for (const std::string op : {"::operator()() const::", "::operator()()::"})
    for (std::size_t k; (k = s.find(op)) != std::string::npos;)
      s.replace(k, op.size(), "::");
  // A reference or pointer to a function names only its type.
  if (s.find("(&)") != std::string::npos || s.find("(*)") != std::string::npos)
    return "";
  return s;
}

struct g_info {
  std::uintptr_t entry = 0;
  std::uintptr_t gopc = 0;
  std::uint64_t parent = 0;
  std::string name;  // filled at write time
};

struct track_key {
  int pid;
  std::int64_t tid;
  bool operator<(const track_key& o) const {
    return pid != o.pid ? pid < o.pid : tid < o.tid;
  }
};

constexpr int pid_ps = 1;
constexpr int pid_ms = 2;
constexpr std::int64_t tid_plain = 1'000'000;  // plain threads' track

struct writer {
  json_out out{nullptr};
  double us_per_tick = 0.001;
  std::uint64_t origin = 0;
  std::unordered_map<std::uint64_t, g_info> gs;
  std::map<std::uintptr_t, std::string> symcache;
  std::map<track_key, std::uint64_t> open;  // track -> open slice's goid
  std::map<track_key, bool> seen;

  std::string sym(std::uintptr_t pc) {
    auto it = symcache.find(pc);
    if (it != symcache.end()) return it->second;
    std::string s = pc ? symbolize(pc).function : std::string();
    symcache.emplace(pc, s);
    return s;
  }

  void name_all() {
    for (auto& [goid, gi] : gs) {
      std::string creator = gi.gopc ? short_name(sym(gi.gopc - 1)) : "";
      std::string n = gi.entry ? short_name(sym(gi.entry)) : "";
      if (n.empty() && !creator.empty()) n = "goroutine in " + creator;
      if (n.empty()) n = "goroutine";
      gi.name = n;
    }
  }

  std::string gname(std::uint64_t goid) {
    auto it = gs.find(goid);
    std::string n = it == gs.end() ? std::string("goroutine") : it->second.name;
    return "G" + std::to_string(goid) + " " + n;
  }

  double us(std::uint64_t ts) const {
    return ts < origin ? 0.0 : double(ts - origin) * us_per_tick;
  }

  void head(const char* ph, const std::string& name, track_key t,
            std::uint64_t ts) {
    seen[t] = true;
    out.begin_event();
    std::fprintf(out.f, "{\"ph\":\"%s\",\"name\":", ph);
    put_string(out.f, name);
    std::fprintf(out.f, ",\"pid\":%d,\"tid\":%lld,\"ts\":%.3f", t.pid,
                 static_cast<long long>(t.tid), us(ts));
  }

  void end(track_key t, std::uint64_t ts) {
    auto it = open.find(t);
    if (it == open.end()) return;
    open.erase(it);
    head("E", "", t, ts);
    std::fputs("}", out.f);
  }

  void begin(track_key t, std::uint64_t ts, std::uint64_t goid,
             const char* what) {
    end(t, ts);
    open[t] = goid;
    std::string name = std::string(what) + gname(goid);
    head("B", name, t, ts);
    std::fprintf(out.f, ",\"cat\":\"%s\",\"args\":{\"goid\":%llu",
                 what[0] ? "syscall" : "goroutine",
                 static_cast<unsigned long long>(goid));
    auto it = gs.find(goid);
    if (it != gs.end()) {
      std::fputs(",\"function\":", out.f);
      put_string(out.f, it->second.name);
      if (it->second.parent)
        std::fprintf(out.f, ",\"parent\":%llu",
                     static_cast<unsigned long long>(it->second.parent));
      if (it->second.gopc) {
        std::fputs(",\"created_by\":", out.f);
        put_string(out.f, short_name(sym(it->second.gopc - 1)));
      }
    }
    std::fputs("}}", out.f);
  }

  // An instant event; `args` is a JSON object body (without braces).
  void instant(track_key t, std::uint64_t ts, const std::string& name,
               const char* cat, const std::string& args) {
    head("i", name, t, ts);
    std::fprintf(out.f, ",\"s\":\"t\",\"cat\":\"%s\",\"args\":{%s}}", cat,
                 args.c_str());
  }

  static track_key p_track(std::int64_t p) { return {pid_ps, p}; }
  static track_key m_track(std::uint32_t m) {
    return {pid_ms, m == UINT32_MAX ? tid_plain : std::int64_t(m)};
  }
  // Where an instant goes: the P's track, else the thread's.
  static track_key where(const trace_event& e) {
    return e.p >= 0 ? p_track(e.p) : m_track(e.m);
  }

  void event(const trace_event& e) {
    auto g = [](std::uint64_t id) { return "\"goid\":" + std::to_string(id); };
    track_key pt = p_track(e.p), mt = m_track(e.m);
    switch (e.type) {
      case trace_ev::none:
      case trace_ev::go_exists:
        break;
      case trace_ev::go_running:
      case trace_ev::go_start:
        if (e.p >= 0) begin(pt, e.ts, e.goid, "");
        begin(mt, e.ts, e.goid, "");
        break;
      case trace_ev::go_create:
        instant(where(e), e.ts,
                "go G" + std::to_string(e.goid) +
                    (e.arg ? " (from G" + std::to_string(e.arg) + ")"
                           : std::string(" (from a thread)")),
                "spawn", g(e.goid) + ",\"parent\":" + std::to_string(e.arg));
        break;
      case trace_ev::go_park: {
        const char* r = wait_reason_string(wait_reason(e.aux));
        if (e.p >= 0) end(pt, e.ts);
        end(mt, e.ts);
        instant(where(e), e.ts,
                "park G" + std::to_string(e.goid) + " [" + r + "]", "park",
                g(e.goid) + ",\"reason\":\"" + r + "\"");
        break;
      }
      case trace_ev::go_yield:
      case trace_ev::go_end:
        if (e.p >= 0) end(pt, e.ts);
        end(mt, e.ts);
        break;
      case trace_ev::go_preempt:
        if (e.aux == 1) {  // the signal's requeue ends the slice itself
          if (e.p >= 0) end(pt, e.ts);
          end(mt, e.ts);
        }
        instant(where(e), e.ts, "preempt G" + std::to_string(e.goid), "preempt",
                g(e.goid) + ",\"how\":\"" +
                    (e.aux == 1 ? "signal" : "safe point") + "\"");
        break;
      case trace_ev::go_unpark: {
        std::string waker =
            e.arg ? "G" + std::to_string(e.arg)
                  : std::string(e.aux == 1 ? "netpoll" : "runtime");
        instant(where(e), e.ts,
                "unpark G" + std::to_string(e.goid) + " by " + waker, "unpark",
                g(e.goid) + ",\"waker\":" + std::to_string(e.arg) +
                    ",\"waker_name\":\"" + waker + "\"");
        break;
      }
      case trace_ev::steal:
        instant(where(e), e.ts,
                "steal G" + std::to_string(e.goid) + " from P" +
                    std::to_string(e.arg),
                "steal", g(e.goid) + ",\"victim\":" + std::to_string(e.arg));
        break;
      case trace_ev::sys_enter:
      case trace_ev::sys_block:
        if (e.p >= 0) end(pt, e.ts);
        begin(mt, e.ts, e.goid, "syscall ");
        if (e.type == trace_ev::sys_block)
          instant(mt, e.ts, "blocking call G" + std::to_string(e.goid),
                  "syscall", g(e.goid));
        break;
      case trace_ev::sys_exit:
        end(mt, e.ts);
        if (e.aux == 1) {
          if (e.p >= 0) begin(pt, e.ts, e.goid, "");
          begin(mt, e.ts, e.goid, "");
        }
        break;
      case trace_ev::handoff:
        instant(p_track(std::int64_t(e.arg)), e.ts,
                "handoff P" + std::to_string(e.arg), "syscall",
                "\"p\":" + std::to_string(e.arg) +
                    ",\"m\":" + std::to_string(std::int64_t(mt.tid)));
        break;
      case trace_ev::preempt_req:
        instant(p_track(std::int64_t(e.arg)), e.ts,
                "preempt request G" + std::to_string(e.goid), "preempt",
                g(e.goid));
        break;
      case trace_ev::netpoll:
        instant(where(e), e.ts, "netpoll: " + std::to_string(e.arg) + " ready",
                "netpoll", "\"ready\":" + std::to_string(e.arg));
        break;
    }
  }

  void metadata() {
    auto name = [&](const char* what, int pid, std::int64_t tid,
                    const std::string& n, bool thread) {
      out.begin_event();
      std::fprintf(out.f, "{\"ph\":\"M\",\"name\":\"%s\",\"pid\":%d", what,
                   pid);
      if (thread)
        std::fprintf(out.f, ",\"tid\":%lld", static_cast<long long>(tid));
      std::fputs(",\"args\":{\"name\":", out.f);
      put_string(out.f, n);
      std::fputs("}}", out.f);
    };
    name("process_name", pid_ps, 0, "goro Ps", false);
    name("process_name", pid_ms, 0, "goro threads (Ms)", false);
    for (auto& [t, _] : seen) {
      std::string n = t.pid == pid_ps      ? "P" + std::to_string(t.tid)
                      : t.tid == tid_plain ? std::string("plain threads")
                                           : "M" + std::to_string(t.tid);
      name("thread_name", t.pid, t.tid, n, true);
    }
  }
};

void write_json(std::FILE* f, std::vector<trace_event>& evs,
                std::uint64_t dropped) {
  std::stable_sort(
      evs.begin(), evs.end(),
      [](const trace_event& a, const trace_event& b) { return a.ts < b.ts; });
  writer w;
  w.out.f = f;
  w.origin = clock0;
  if (use_tsc && clock1 > clock0 && nano1 > nano0)
    w.us_per_tick = double(nano1 - nano0) / 1000.0 / double(clock1 - clock0);
  for (const trace_event& e : evs) {
    if (e.type == trace_ev::go_exists || e.type == trace_ev::go_start ||
        e.type == trace_ev::go_running) {
      g_info& gi = w.gs[e.goid];
      if (e.type == trace_ev::go_exists && e.aux == 2)
        gi.gopc = e.arg;
      else if (e.arg)
        gi.entry = e.arg;
    } else if (e.type == trace_ev::go_create) {
      w.gs[e.goid].parent = e.arg;
    }
  }
  w.name_all();
  std::fputs("{\"traceEvents\":[", f);
  for (const trace_event& e : evs) w.event(e);
  // Slices still open when tracing stopped end there.
  std::uint64_t stop_ts = clock1;
  if (!evs.empty() && evs.back().ts > stop_ts) stop_ts = evs.back().ts;
  while (!w.open.empty()) w.end(w.open.begin()->first, stop_ts);
  w.metadata();
  std::fprintf(f,
               "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":"
               "\"goro\",\"clock\":\"%s\",\"events\":%zu,\"dropped\":%llu}}\n",
               use_tsc ? "tsc" : "monotonic", evs.size(),
               static_cast<unsigned long long>(dropped));
}

void env_stop_at_exit() { trace_env_stop(); }

}  // namespace

void trace_env_start() {
  const char* e = std::getenv("GORO_TRACE");
  if (e == nullptr || *e == 0) return;
  std::lock_guard<std::mutex> lk(ctl_mu);
  try {
    out_file = open_out(e);
    map_pool();
  } catch (const std::exception& ex) {
    if (out_file) std::fclose(out_file);
    out_file = nullptr;
    std::fprintf(stderr, "goro: GORO_TRACE: %s; not tracing\n", ex.what());
    return;
  }
  out_path = e;
  use_tsc = tsc_usable();
  env_started = true;
  // Called by schedinit before any goroutine or M runs: nothing records
  // yet, so no world stop is needed.
  arm();
  std::atexit(env_stop_at_exit);
}

void trace_env_stop() {
  {
    std::lock_guard<std::mutex> lk(ctl_mu);
    if (!env_started || pool == nullptr) return;
    env_started = false;
  }
  try {
    goro::trace::stop();
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "goro: GORO_TRACE: %s\n", ex.what());
  }
}

}  // namespace goro::rt

namespace goro::trace {

void start(const std::string& path) {
  using namespace rt;
  // Before ctl_mu: starting the runtime may start GORO_TRACE's trace.
  detail::ensure_started(nullptr);
  std::lock_guard<std::mutex> lk(ctl_mu);
  if (pool != nullptr)
    throw std::logic_error(
        "goro::trace::start: a trace is already being taken (into " + out_path +
        ")");
  std::FILE* f = open_out(path);
  try {
    map_pool();
  } catch (...) {
    std::fclose(f);
    throw;
  }
  out_file = f;
  out_path = path;
  use_tsc = tsc_usable();
  stop_the_world();
  arm();
  start_the_world(0);
}

void stop() {
  using namespace rt;
  std::lock_guard<std::mutex> lk(ctl_mu);
  if (pool == nullptr)
    throw std::logic_error("goro::trace::stop: no trace is being taken");
  env_started = false;
  stop_the_world();
  std::uint64_t dropped = disarm();
  start_the_world(0);
  finish(dropped);
}

bool active() { return rt::trace_on.load(std::memory_order_acquire); }

trace_stats last_stats() {
  std::lock_guard<std::mutex> lk(rt::ctl_mu);
  return rt::last;
}

}  // namespace goro::trace
