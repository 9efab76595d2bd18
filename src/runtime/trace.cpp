// trace.cpp: the execution tracer (Go's runtime/trace.go): event buffers,
// goro::trace::start/stop, GORO_TRACE, and the Chrome Trace Event writer.
//
// Buffers. One anonymous mapping of GORO_TRACE_BUFFER MiB (64 by default;
// MAP_NORESERVE, so only the pages written cost memory) is cut into 64 KiB
// chunks. A P takes the next chunk with one fetch_add when its current one
// is full: no allocation, no lock and no waiting on the recording path.
// A chunk's first 32 bytes are its header (the owner: a P's id, or -1 for
// the P-less buffer; the order chunks were taken in); a chunk's unused tail
// is the mapping's zero fill (trace_ev::none), which is where reading stops.
// A P's chunks hold records of 4-byte units (trace.hpp), the P-less buffer's
// full 32-byte events. When every chunk is taken, events are dropped and
// counted per buffer (reported in the file's metadata and by
// goro::trace::last_stats).
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

#include <sched.h>
#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
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
#include <string_view>
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
std::atomic<std::uint32_t> trace_epoch{0};
std::uint64_t trace_dense_ticks = 512;

namespace {

constexpr std::size_t chunk_bytes = 64 * 1024;
constexpr std::size_t chunk_units = chunk_bytes / sizeof(std::uint32_t);
constexpr std::size_t chunk_events = chunk_bytes / sizeof(trace_event);
constexpr std::int32_t max_procs = 1024;  // allp's size (proc.cpp)
constexpr std::uint64_t ts_mask = (std::uint64_t(1) << 56) - 1;

// A chunk's first 32 bytes: whose it is, and when it was taken (chunks of
// one P are read back in seq order).
struct chunk_header {
  std::int64_t owner;  // the P's id; -1: the buffer of threads without a P
  std::uint64_t seq;
  std::uint64_t unused[2];
};
static_assert(sizeof(chunk_header) == 4 * sizeof(std::uint64_t));
static_assert(sizeof(chunk_header) == sizeof(trace_event));

// The mapping and its chunk counter. Written under the world stop.
char* pool = nullptr;
std::size_t pool_bytes = 0;
std::uint32_t pool_chunks = 0;
std::atomic<std::uint32_t> pool_next{0};

// The buffer of threads without a P (full 32-byte events).
std::atomic<bool> noP_lock{false};
trace_event* noP_pos = nullptr;
trace_event* noP_end = nullptr;
std::uint64_t noP_dropped = 0;

bool use_tsc = false;
std::uint64_t clock0 = 0, clock1 = 0;  // trace clock at start and stop
std::uint64_t clock_stop = 0;          // when recording stopped
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

// The next free chunk, its header written; null once none is left.
char* take_chunk(std::int64_t owner) {
  std::uint32_t i = pool_next.load(std::memory_order_relaxed);
  if (i < pool_chunks) i = pool_next.fetch_add(1, std::memory_order_relaxed);
  if (i >= pool_chunks) return nullptr;
  char* c = pool + std::size_t(i) * chunk_bytes;
  auto* h = reinterpret_cast<chunk_header*>(c);
  h->owner = owner;
  h->seq = i;
  return c;
}

// sysmon's part of a trace (trace_tick_slow, every round while tracing):
// it ends the Ps' bursts. in_tick is set while it does; disarm clears trace_on
// and then waits for in_tick to clear (seq_cst on both sides: either sysmon
// sees the flag clear, or disarm sees in_tick set), so no part of a tick
// touches a cursor once the world restarts after disarm.
std::atomic<bool> in_tick{false};

// The P records' layout (see "A P's record" in trace.hpp).
constexpr std::uint64_t rec_type_mask = 0x3f;
constexpr std::uint64_t rec_wide = 0x40;
constexpr std::uint64_t rec_field_max = (std::uint64_t(1) << 24) - 1;
constexpr std::uint64_t rec_interp = trace_rec_interp;
constexpr std::uint32_t rec_short = trace_rec_short;
constexpr int rec_field_shift = 8;
constexpr int rec_goid_shift = 32;

// A 64-bit word at a 4-byte-aligned unit.
inline void put64(std::uint32_t* p, std::uint64_t w) { std::memcpy(p, &w, 8); }
inline std::uint64_t get64(const std::uint32_t* p) {
  std::uint64_t w;
  std::memcpy(&w, p, 8);
  return w;
}

// Bursts (trace.hpp, "Interpolated records"): a window is dense when the
// units written in it came at most dense_ticks apart on average (0.15-0.5
// us of TSC on 1-3.5 GHz counters, 0.5 us of CLOCK_MONOTONIC); after a
// dense window, records may skip the clock in the next burst_units units
// (up to 32 switches of a yield, 10 of a spawn chain). A window's span is
// then at most (burst_units + 1) * dense_ticks while a burst lasts.
std::uint64_t dense_ticks = trace_dense_ticks;  // as the trace started
constexpr std::ptrdiff_t burst_units = 32;
bool bursts = true;  // false under GORO_TRACE_EXACT=1

// How a record is timed: not at all (it borrows the next time on its P),
// by a clock read, or by a clock read unless the P is in a burst.
enum class tclock : std::uint8_t { none, exact, burst };

// Room for `n` more units in `pp`'s chunk; false (the event dropped) once
// the buffer is exhausted. Kept out of line: it runs once per chunk.
[[gnu::noinline]] bool refill(trace_cursor& c, P* pp, std::size_t n) {
  if (c.pos != nullptr && std::size_t(c.end - c.pos) >= n) return true;
  char* ch = take_chunk(pp->id);
  if (ch == nullptr) {
    c.pos = c.end = nullptr;
    c.dropped++;
    return false;
  }
  auto* first = reinterpret_cast<std::uint32_t*>(ch);
  c.pos = first + sizeof(chunk_header) / sizeof(std::uint32_t);
  c.end = first + chunk_units;
  // A new chunk restates the P's M and the time in full (wide): the tail
  // of the previous chunk may be unused.
  if (c.m >= 0) {
    std::uint64_t ts = trace_clock();
    c.last_ts = ts;
    put64(c.pos, std::uint64_t(trace_ev::proc_m) | rec_wide |
                     std::uint64_t(c.m) << rec_goid_shift);
    put64(c.pos + 2, ts & ts_mask);
    c.pos += 4;
  }
  // A window ends here (for the decoder too); no burst until the next
  // read finds a dense one.
  c.read_pos = c.pos;
  __atomic_store_n(&c.lim, nullptr, __ATOMIC_RELAXED);
  return true;
}

// A record that does not fit one word: an aux value in a timed record, a
// time step of 2^24 ticks or more, a goid of 2^32 or more. The caller
// checked that four units are free.
void put_wide(trace_cursor& c, trace_ev type, std::uint64_t goid,
              std::uint32_t aux, std::uint64_t ts) {
  c.refs.note(type, goid);
  put64(c.pos, std::uint64_t(type) | rec_wide |
                   std::uint64_t(aux & rec_field_max) << rec_field_shift |
                   (goid & 0xffffffff) << rec_goid_shift);
  put64(c.pos + 2, (ts & ts_mask) | ((goid >> 32) & 0xff) << 56);
  c.pos += 4;
}

// One record into `pp`'s buffer (the caller holds pp), out of line: the
// timed records, and the untimed ones the inline paths could not write. A
// timed record's 24-bit field is the ticks since the P's previous timed
// record; an untimed or interpolated one's is its aux value (at most 16
// bits). A clock read ends a window (the units since the previous read):
// if it was dense, a burst follows.
[[gnu::noinline]] void put_timed(P* pp, trace_ev type, std::uint64_t goid,
                                 std::uint32_t aux, tclock clk);

// The pending exit or park of the P's running goroutine
// (trace_cursor::stopped), as a record of its own: before any record but a
// short go_start.
[[gnu::noinline]] void flush_stop(P* pp) {
  trace_cursor& c = pp->trace;
  trace_stop stop = trace_stop_of(c.stopped >> trace_stop_shift);
  c.stopped = 0;
  // Its goid is refs.run's: a short record, if a unit is free.
  if (!trace_put_short(c, stop.type, c.refs.run, stop.aux))
    put_timed(pp, stop.type, c.refs.run, stop.aux, tclock::none);
}

[[gnu::noinline]] void put_timed(P* pp, trace_ev type, std::uint64_t goid,
                                 std::uint32_t aux, tclock clk) {
  trace_cursor& c = pp->trace;
  if (c.stopped != 0) flush_stop(pp);
  if (std::size_t(c.end - c.pos) < 4 && !refill(c, pp, 4)) return;
  std::uint64_t field = aux, ts = 0;
  bool dense = false;
  if (clk != tclock::none) {
    ts = trace_clock();
    field = ts - c.last_ts;
    dense = field <= std::uint64_t(c.pos - c.read_pos + 1) * dense_ticks;
    if (aux != 0) field = ~std::uint64_t(0);
  }
  if (field > rec_field_max || goid > 0xffffffff) [[unlikely]] {
    put_wide(c, type, goid, aux, ts);
  } else {
    c.refs.note(type, goid);
    put64(c.pos, std::uint64_t(type) | field << rec_field_shift |
                     goid << rec_goid_shift);
    c.pos += 2;
  }
  if (clk != tclock::none) {
    c.last_ts = ts;
    c.read_pos = c.pos;
    std::uint32_t* lim = nullptr;
    if (dense && bursts)
      lim = c.end - c.pos > burst_units ? c.pos + burst_units : c.end;
    __atomic_store_n(&c.lim, lim, __ATOMIC_RELAXED);
  }
}

// A goroutine record without a time (interpolated or untimed; the caller
// checked that two units are free and the goid fits 32 bits): one unit
// (trace_put_short) if it can, else two.
[[gnu::always_inline]] inline void put_untimed(trace_cursor& c, trace_ev type,
                                               std::uint32_t flags,
                                               std::uint64_t goid,
                                               std::uint32_t aux) {
  if (trace_put_unit(c, type, flags, goid, aux)) return;
  c.refs.note(type, goid);
  put64(c.pos, std::uint64_t(type) | flags |
                   std::uint64_t(aux) << rec_field_shift |
                   goid << rec_goid_shift);
  c.pos += 2;
}

// One record into pp's stream: without a time where it may (a burst, an
// untimed record), else through put_timed.
[[gnu::always_inline]] inline void put_rec(P* pp, trace_ev type,
                                           std::uint64_t goid,
                                           std::uint32_t aux,
                                           tclock clk = tclock::exact) {
  trace_cursor& c = pp->trace;
  if (c.stopped != 0) [[unlikely]]
    flush_stop(pp);
  bool room = c.end - c.pos >= 2 && goid <= 0xffffffff;
  // In a burst, a record whose goid is far from the previous one's takes
  // two units, still without a clock read (lim <= end: check the room).
  if (clk == tclock::burst && room &&
      c.pos < __atomic_load_n(&c.lim, __ATOMIC_RELAXED)) {
    put_untimed(c, type, rec_interp, goid, aux);
    return;
  }
  if (clk == tclock::none && room) {
    put_untimed(c, type, 0, goid, aux);
    return;
  }
  put_timed(pp, type, goid, aux, clk);
}

void lock_noP() {
  while (noP_lock.exchange(true, std::memory_order_acquire))
    while (noP_lock.load(std::memory_order_relaxed)) __builtin_ia32_pause();
}
void unlock_noP() { noP_lock.store(false, std::memory_order_release); }

// A full event into the P-less buffer; ts 0: now. The caller holds
// noP_lock, or the world is stopped.
void append_noP(const trace_event& e) {
  if (noP_pos == noP_end) {
    char* ch = take_chunk(-1);
    if (ch == nullptr) {
      noP_dropped++;
      return;
    }
    noP_pos = reinterpret_cast<trace_event*>(ch) + 1;
    noP_end = reinterpret_cast<trace_event*>(ch) + chunk_events;
  }
  *noP_pos = e;
  if (noP_pos->ts == 0) noP_pos->ts = trace_clock();
  noP_pos++;
}

// The same from sysmon, a plain thread or a thread in a blocking call.
void put_noP(const trace_event& e) {
  lock_noP();
  if (trace_on.load(std::memory_order_relaxed)) append_noP(e);
  unlock_noP();
}

// A record in the decoded form. ctx: the goroutine the P's stream implies
// (its running G) or, for a thread without a P, the caller's goroutine;
// it is the waker of an unpark and the parent of a create.
trace_event widen(trace_ev type, std::uint64_t ts, std::uint64_t goid,
                  std::uint16_t aux, std::int16_t p, std::uint32_t m,
                  std::uint64_t ctx) {
  trace_event e{ts, goid, 0, m, type, std::uint8_t(aux), p};
  switch (type) {
    case trace_ev::go_create:
      e.arg = aux == unpark_by_g ? ctx : 0;
      e.aux = 0;
      break;
    case trace_ev::go_unpark:
      e.arg = aux == unpark_by_g ? ctx : 0;
      e.aux = aux == unpark_by_netpoll ? 1 : 0;
      break;
    case trace_ev::steal:
    case trace_ev::handoff:
    case trace_ev::preempt_req:
      e.arg = aux;
      e.aux = 0;
      break;
    case trace_ev::netpoll:
      e.arg = goid;
      e.goid = 0;
      break;
    default:
      break;
  }
  return e;
}

// An event: into the calling thread's P's stream, else (sysmon, a plain
// thread, a thread in a blocking call) the P-less buffer in decoded form.
// untimed: the event borrows the next timed record's time on its P (see
// trace.hpp); only for events schedule() follows at once.
// The P-less half, out of line so that the P path (inlined into each
// recorder) keeps a small frame.
[[gnu::noinline]] void record_noP(M* mp, trace_ev type, std::uint64_t goid,
                                  std::uint16_t aux, std::uint64_t ctx) {
  put_noP(widen(type, 0, goid, aux, -1, mp ? std::uint32_t(mp->id) : UINT32_MAX,
                ctx));
}

inline void record(trace_ev type, std::uint64_t goid, std::uint16_t aux,
                   std::uint64_t ctx = 0, tclock clk = tclock::exact) {
  // Acquire: pairs with start's release store, so the mapping is seen.
  if (!trace_on.load(std::memory_order_acquire)) return;
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  if (pp == nullptr) [[unlikely]] {
    record_noP(mp, type, goid, aux, ctx);
    return;
  }
  put_rec(pp, type, goid, aux, clk);
}

std::uint64_t goid_of(G* gp) { return gp ? gp->goid : 0; }

}  // namespace

void trace_tick_slow() {
  // in_tick: see "sysmon's part"; seq_cst against disarm's flag store.
  in_tick.store(true, std::memory_order_seq_cst);
  if (trace_on.load(std::memory_order_seq_cst)) {
    // Every P's burst ends (a racy null is fine: trace_cursor::lim), then
    // the epoch moves (tests wait on it to know a round has passed).
    std::int32_t np = gomaxprocs_now();
    for (std::int32_t i = 0; i < np; i++)
      __atomic_store_n(&allp[i]->trace.lim, nullptr, __ATOMIC_RELAXED);
    trace_epoch.fetch_add(1, std::memory_order_release);
  }
  in_tick.store(false, std::memory_order_release);
}

void trace_go_create_slow(G* gp, G* parent) {
  if (!trace_on.load(std::memory_order_acquire)) return;
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  if (pp == nullptr) {
    // From a plain thread: the site travels in the event's own fields.
    trace_event e{0,
                  gp->goid,
                  goid_of(parent),
                  mp ? std::uint32_t(mp->id) : UINT32_MAX,
                  trace_ev::go_create,
                  0,
                  -1};
    put_noP(e);
    e.type = trace_ev::go_exists;
    e.arg = reinterpret_cast<std::uintptr_t>(gp->entry);
    put_noP(e);
    e.arg = reinterpret_cast<std::uintptr_t>(gp->gopc);
    e.aux = 2;
    put_noP(e);
    return;
  }
  trace_cursor& c = pp->trace;
  auto entry = reinterpret_cast<std::uintptr_t>(gp->entry);
  auto gopc = reinterpret_cast<std::uintptr_t>(gp->gopc);
  if (entry != c.site_entry || gopc != c.site_gopc) [[unlikely]] {
    // A new spawn site: three words before the create.
    if (c.stopped != 0) flush_stop(pp);
    if (!refill(c, pp, 6)) return;
    put64(c.pos, std::uint64_t(trace_ev::go_site));
    put64(c.pos + 2, entry);
    put64(c.pos + 4, gopc);
    c.pos += 6;
    c.site_entry = entry;
    c.site_gopc = gopc;
  }
  put_rec(pp, trace_ev::go_create, gp->goid,
          parent != nullptr ? unpark_by_g : unpark_by_runtime, tclock::burst);
}
void trace_go_start_slow(G* gp) {
  record(trace_ev::go_start, gp->goid, 0, 0, tclock::burst);
}
void trace_go_park_slow(G* gp) {
  record(trace_ev::go_park, gp->goid,
         std::uint16_t(gp->waitreason.load(std::memory_order_relaxed)), 0,
         tclock::none);
}
void trace_go_preempt_slow(G* gp, bool async) {
  record(trace_ev::go_preempt, gp->goid, async ? 1 : 0, 0, tclock::none);
}
void trace_go_end_slow(G* gp) {
  record(trace_ev::go_end, gp->goid, 0, 0, tclock::none);
}
void trace_go_unpark_slow(G* gp) {
  if (!trace_on.load(std::memory_order_acquire)) return;
  M* mp = getm();
  G* waker = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr;
  std::uint16_t by = waker != nullptr ? unpark_by_g : unpark_by_runtime;
  P* pp = mp ? mp->p : nullptr;
  if (pp == nullptr) [[unlikely]] {
    record_noP(mp, trace_ev::go_unpark, gp->goid, by, goid_of(waker));
    return;
  }
  put_rec(pp, trace_ev::go_unpark, gp->goid, by, tclock::burst);
}
void trace_steal_slow(G* gp, P* victim) {
  record(trace_ev::steal, gp->goid, std::uint16_t(victim->id), 0,
         tclock::burst);
}
void trace_sys_enter_slow(G* gp) { record(trace_ev::sys_enter, gp->goid, 0); }
void trace_sys_exit_slow(G* gp, bool got_p) {
  record(trace_ev::sys_exit, gp->goid, got_p ? 1 : 0);
}
void trace_sys_block_slow(G* gp) { record(trace_ev::sys_block, gp->goid, 0); }
void trace_handoff_slow(P* pp) {
  record(trace_ev::handoff, 0, std::uint16_t(pp->id));
}
void trace_preempt_req_slow(G* gp, P* pp) {
  // From sysmon: gp may be exiting and reused by a newproc right now
  // (which stores the goid atomically), so the goid may be the next one's.
  record(trace_ev::preempt_req, __atomic_load_n(&gp->goid, __ATOMIC_RELAXED),
         std::uint16_t(pp->id));
}
void trace_netpoll_slow(G* first, std::int32_t n) {
  if (n == 0) return;
  record(trace_ev::netpoll, std::uint64_t(n), 0);
  // The poller is the waker.
  for (G* gp = first; gp != nullptr; gp = gp->schedlink)
    record(trace_ev::go_unpark, gp->goid, unpark_by_netpoll);
}
void trace_proc_stop_slow(P* pp) {
  // Called by the M about to release pp, which it still holds.
  if (!trace_on.load(std::memory_order_acquire)) return;
  put_rec(pp, trace_ev::proc_stop, 0, 0);
}
void trace_proc_m_slow(P* pp) {
  // Called by the M that has just acquired pp (acquirep).
  if (!trace_on.load(std::memory_order_acquire)) return;
  M* mp = getm();
  if (pp->trace.m == mp->id) return;
  pp->trace.m = mp->id;
  put_rec(pp, trace_ev::proc_m, std::uint64_t(mp->id), 0);
}

namespace {

// ---------------------------------------------------------------------------
// Control: start, stop, GORO_TRACE.

// ctl_mu guards the control state and is held only while it changes,
// never across a world stop or the writing of the file: a goroutine may
// park in either (on worldsema, or in the blocking call of the write), and
// a goroutine must not park holding an OS lock. `state` keeps a second
// start, or a stop, out while the first is between its steps.
enum class ctl_state { idle, starting, on, stopping };
std::mutex ctl_mu;
ctl_state state = ctl_state::idle;
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
  // No huge pages (MADV_HUGEPAGE): with them a recorder faults once per
  // 2 MiB instead of once per 4 KiB, but on the VMs we measure on such a
  // fault could take milliseconds (memory the host had not backed yet),
  // and a traced run was then 30-60% slower than with 4 KiB pages, at
  // random; with 4 KiB pages the runs are steady.
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
  // GORO_TRACE_EXACT=1 (any value but empty or 0): every timed record reads
  // the clock.
  const char* exact = std::getenv("GORO_TRACE_EXACT");
  bursts = exact == nullptr || *exact == 0 || std::strcmp(exact, "0") == 0;
  dense_ticks = trace_dense_ticks;
  noP_pos = noP_end = nullptr;
  noP_dropped = 0;
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
        append_noP(e);
        e.arg = reinterpret_cast<std::uintptr_t>(gp->gopc);
        e.aux = 2;
        append_noP(e);
      },
      nullptr);
  // The caller itself, if a goroutine: it runs on its P from here on (the
  // decoder starts that P's stream with this M and this goroutine).
  M* mp = getm();
  if (G* gp = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr) {
    append_noP(trace_event{clock0, gp->goid,
                           reinterpret_cast<std::uintptr_t>(gp->entry),
                           std::uint32_t(mp->id), trace_ev::go_running, 0,
                           std::int16_t(mp->p ? mp->p->id : -1)});
  }
  if (mp != nullptr && mp->p != nullptr) mp->p->trace.m = mp->id;
  trace_on.store(true, std::memory_order_release);
}

// With the world stopped: clear the flag, wait out a P-less recorder, sum
// the drops.
std::uint64_t disarm() {
  trace_on.store(false, std::memory_order_seq_cst);
  // A sysmon tick that saw the flag set finishes first (a few stores).
  while (in_tick.load(std::memory_order_seq_cst)) sched_yield();
  // Exits and parks still waiting for their P's next record.
  each_p([](P* pp) {
    if (pp->trace.stopped != 0) flush_stop(pp);
  });
  lock_noP();
  unlock_noP();
  std::uint64_t dropped = noP_dropped;
  for (std::int32_t i = 0; i < max_procs && allp[i] != nullptr; i++)
    dropped += allp[i]->trace.dropped;
  clock1 = clock_stop = trace_clock();
  nano1 = nanotime();
  return dropped;
}

// A record's 56-bit timestamp as a full clock reading: the high bits are
// the start's (a wrap of the low 56 bits would take years).
std::uint64_t widen_ts(std::uint64_t low) {
  std::uint64_t ts = (clock0 & ~ts_mask) | low;
  if (ts < clock0 && clock0 - ts > (ts_mask >> 1)) ts += ts_mask + 1;
  return ts;
}

// An interpolated event's time while decode() waits for the next timed one.
constexpr std::uint64_t interp_mark = ~std::uint64_t(0);
std::uint64_t interpolated = 0;  // the last decode()'s interpolated records

// Decodes the buffers into events: the P-less chunks as they are, each P's
// chunks in the order it took them, with the P, the M and the running
// goroutine (a waker's or parent's id) carried along the stream.
std::vector<trace_event> decode() {
  interpolated = 0;
  struct stream {
    std::vector<std::pair<std::uint64_t, const char*>> chunks;  // seq, chunk
    std::uint32_t m = UINT32_MAX;
    std::uint64_t running = 0;
    std::uint64_t last_ts = 0;  // as the P's trace_cursor::last_ts
    // The mean gap of the last dense window (the burst's pace).
    std::uint64_t gap = dense_ticks;
    trace_goid_refs refs;  // as the P's trace_cursor::refs
  };
  std::map<std::int64_t, stream> ps;
  std::vector<trace_event> evs;
  std::uint32_t used = std::min(pool_next.load(), pool_chunks);
  for (std::uint32_t i = 0; i < used; i++) {
    const char* ch = pool + std::size_t(i) * chunk_bytes;
    auto* h = reinterpret_cast<const chunk_header*>(ch);
    if (h->owner >= 0) {
      ps[h->owner].chunks.emplace_back(h->seq, ch);
      continue;
    }
    auto* first = reinterpret_cast<const trace_event*>(ch);
    for (std::size_t k = 1; k < chunk_events; k++) {
      const trace_event& e = first[k];
      if (e.type == trace_ev::none) break;
      evs.push_back(e);
      if (e.type == trace_ev::go_running && e.p >= 0) {
        ps[e.p].m = e.m;
        ps[e.p].running = e.goid;
      }
    }
  }
  for (auto& entry : ps) {
    // Named references, not a structured binding: clang 14 cannot capture
    // one in the lambda below.
    const std::int64_t p = entry.first;
    stream& st = entry.second;
    std::sort(st.chunks.begin(), st.chunks.end());
    // Events since the stream's last timed record, from evs[pending]:
    // untimed ones (ts 0) and interpolated ones (ts interp_mark; their
    // indices in `interp`, the events decoded with them follow each).
    std::size_t pending = evs.size();
    std::vector<std::size_t> interp;
    // At the next timed record, `ts`: the interpolated records get times
    // between the last timed one and ts, evenly if the window was dense
    // (as the recorder saw it when it skipped the clock, so the error is
    // at most the window's span: a few microseconds), else at the burst's
    // own pace, the rest of the span going to the last slice (the window
    // was ended by a long slice or by sysmon's tick, trace.hpp). Then each
    // untimed event takes the time of the next event on its P.
    // `units`: the units written in the window before the record at ts.
    auto settle = [&](std::uint64_t ts, std::uint64_t units) {
      if (std::size_t n = interp.size(); n != 0) {
        std::uint64_t a = st.last_ts, span = ts > a ? ts - a : 0;
        bool dense = span <= (units + 1) * dense_ticks;
        std::uint64_t step = std::min(st.gap, span / (n + 1));
        for (std::size_t i = 0; i < n; i++)
          evs[interp[i]].ts =
              dense ? a + span * (i + 1) / (n + 1) : a + step * (i + 1);
        if (dense) st.gap = span / (n + 1);
        interpolated += n;
        interp.clear();
        for (std::size_t i = pending; i < evs.size(); i++)
          if (evs[i].ts == interp_mark) evs[i].ts = evs[i - 1].ts;
      }
      std::uint64_t next = ts;
      for (std::size_t i = evs.size(); i-- > pending;) {
        if (evs[i].ts == 0)
          evs[i].ts = next;
        else
          next = evs[i].ts;
      }
      pending = evs.size();
    };
    // The exit (code 1) or park (2 + the reason) of the P's running
    // goroutine, folded into a later unit (trace_cursor::stopped).
    auto push_stop = [&](std::uint32_t code, std::uint64_t ts) {
      trace_stop stop = trace_stop_of(code);
      evs.push_back(widen(stop.type, ts, st.refs.run, std::uint16_t(stop.aux),
                          std::int16_t(p), st.m, st.running));
      st.running = 0;
    };
    std::uintptr_t site_entry = 0, site_gopc = 0;
    for (auto& [seq, ch] : st.chunks) {
      auto* r = reinterpret_cast<const std::uint32_t*>(ch);
      // Where the window of the next clock read began (as the recorder's
      // trace_cursor::read_pos): a chunk starts one.
      std::size_t read_k = sizeof(chunk_header) / 4;
      for (std::size_t k = read_k; k < chunk_units; k++) {
        const std::size_t k0 = k;
        std::uint32_t u = r[k];
        if (u == 0) break;  // trace_ev::none: the chunk's unused tail
        std::uint64_t w, field, goid;
        trace_ev type;
        // A stop folded into this unit (trace_cursor::stopped): its code,
        // and whether the unit is also the go_start of its goroutine.
        std::uint32_t stop = 0;
        bool starts = false;
        if (u & rec_short) {
          // One unit: no time, an 8-bit aux, the goid as a difference.
          w = u & ~std::uint32_t(trace_rec_started);  // bit 6 is not "wide"
          type = trace_ev(u & (rec_type_mask & ~std::uint64_t(rec_short)));
          field = (u >> rec_field_shift) & 0xff;
          goid = st.refs.ref(type) +
                 std::uint64_t(std::int64_t(std::int16_t(u >> 16)));
          if (type == trace_ev::go_start || (u & trace_rec_started)) {
            stop = u >> trace_stop_shift & 0x3f;
            field &= (1u << (trace_stop_shift - rec_field_shift)) - 1;
            starts = type != trace_ev::go_start;
          }
          if (type == trace_ev::go_start && stop != 0) {
            // The exit or park of the P's running goroutine, folded into
            // this start: untimed, it takes the start's time.
            push_stop(stop, 0);
          }
        } else {
          if (k + 1 >= chunk_units) break;
          w = get64(r + k);
          k += 1;
          type = trace_ev(w & rec_type_mask);
          if (type == trace_ev::go_site) {
            if (k + 4 >= chunk_units) break;
            site_entry = get64(r + k + 1);
            site_gopc = get64(r + k + 3);
            k += 4;
            continue;
          }
          field = (w >> rec_field_shift) & rec_field_max;
          goid = w >> rec_goid_shift;
        }
        std::uint64_t ts = 0;
        std::uint32_t aux = 0;
        bool timed = type != trace_ev::go_park && type != trace_ev::go_end &&
                     type != trace_ev::go_preempt;
        bool interpolated_rec = (w & rec_interp) != 0;
        if (w & rec_wide) {
          if (k + 2 >= chunk_units) break;
          std::uint64_t w1 = get64(r + k + 1);
          k += 2;
          goid |= (w1 >> 56) << 32;
          aux = std::uint32_t(field);
          if ((w1 & ts_mask) != 0) ts = widen_ts(w1 & ts_mask);
        } else if (interpolated_rec) {
          aux = std::uint32_t(field);
        } else if (timed) {
          ts = st.last_ts + field;
        } else {
          aux = std::uint32_t(field);
        }
        st.refs.note(type, goid);
        if (ts != 0) {
          settle(ts, k0 - read_k);
          st.last_ts = ts;
          read_k = k + 1;
        }
        if (interpolated_rec) {
          interp.push_back(evs.size());
          ts = interp_mark;
        }
        if (type == trace_ev::proc_m) {
          st.m = std::uint32_t(goid);
          continue;
        }
        if (type == trace_ev::proc_stop) continue;
        trace_event e = widen(type, ts, goid, std::uint16_t(aux),
                              std::int16_t(p), st.m, st.running);
        evs.push_back(e);
        switch (type) {
          case trace_ev::go_create:
            // The name and the spawn site, as the P-less form carries them.
            e.type = trace_ev::go_exists;
            e.arg = site_entry;
            evs.push_back(e);
            e.arg = site_gopc;
            e.aux = 2;
            evs.push_back(e);
            break;
          case trace_ev::go_start:
            st.running = goid;
            break;
          case trace_ev::sys_exit:
            if (aux == 1) st.running = goid;
            break;
          case trace_ev::go_park:
          case trace_ev::go_end:
          case trace_ev::go_preempt:
          case trace_ev::sys_enter:
          case trace_ev::sys_block:
            st.running = 0;
            break;
          default:
            break;
        }
        if (starts) {
          // The unit also says that the goroutine it created or woke was
          // the P's next start, after the stop of the one before it: both
          // at this unit's time.
          std::uint64_t same = interpolated_rec ? interp_mark : 0;
          if (stop != 0) push_stop(stop, same);
          st.refs.note(trace_ev::go_start, goid);
          evs.push_back(widen(trace_ev::go_start, same, goid, 0,
                              std::int16_t(p), st.m, st.running));
          st.running = goid;
        }
      }
    }
    // The last window's units are not known here; its interpolated records
    // (a unit each at least) stand in.
    settle(clock_stop, interp.size());
  }
  return evs;
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
  std::vector<trace_event> evs = decode();
  munmap(pool, pool_bytes);
  pool = nullptr;
  std::FILE* f = out_file;
  out_file = nullptr;
  {
    std::lock_guard<std::mutex> lk(ctl_mu);
    last.events = evs.size();
    last.dropped = dropped;
    last.interpolated = interpolated;
  }
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

// Buffered output: the file is written in 1 MiB blocks, numbers with
// std::to_chars (stdio's per-character calls made writing the most
// expensive part of a trace).
struct json_out {
  std::FILE* f = nullptr;
  bool first = true;
  std::string buf;
  void flush() {
    if (!buf.empty()) std::fwrite(buf.data(), 1, buf.size(), f);
    buf.clear();
  }
  void raw(std::string_view s) {
    buf.append(s);
    if (buf.size() >= (1 << 20)) flush();
  }
  void num(std::uint64_t v) {
    char t[24];
    auto r = std::to_chars(t, t + sizeof t, v);
    buf.append(t, r.ptr);
  }
  void inum(std::int64_t v) {
    char t[24];
    auto r = std::to_chars(t, t + sizeof t, v);
    buf.append(t, r.ptr);
  }
  // Microseconds with three decimals (nanosecond resolution).
  void micros(double us) {
    auto ns = std::uint64_t(us * 1000.0 + 0.5);
    num(ns / 1000);
    char t[4] = {'.', char('0' + ns / 100 % 10), char('0' + ns / 10 % 10),
                 char('0' + ns % 10)};
    buf.append(t, 4);
  }
  void str(std::string_view s) {
    buf.push_back('"');
    for (unsigned char c : s) {
      if (c == '"' || c == '\\') {
        buf.push_back('\\');
        buf.push_back(char(c));
      } else if (c < 0x20) {
        char t[8];
        std::snprintf(t, sizeof t, "\\u%04x", c);
        buf.append(t);
      } else {
        buf.push_back(char(c));
      }
    }
    buf.push_back('"');
  }
  void begin_event() {
    raw(first ? "\n" : ",\n");
    first = false;
  }
};

// The user's function inside goro's spawn plumbing:
// "goro::detail::closure<goro::detail::bind_call<F>(...)::{lambda()#1}>::
// entry(void*)" -> F.
std::string short_name(const std::string& fn) {
  const std::string key = "bind_call<";
  std::size_t i = fn.find(key);
  // Goroutine 1: the function given to goro::run, behind run_main's own
  // closure (Go's traces name it runtime.main).
  if (i == std::string::npos &&
      fn.find("goro::detail::closure<goro::detail::run_main") == 0)
    return "goro::run";
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
  // The name and args of its slices as JSON members, built once.
  std::string slice_members;
};

constexpr int pid_ps = 1;
constexpr int pid_ms = 2;
constexpr std::int64_t tid_plain = 1'000'000;  // plain threads' track

// A track: pid_ps with tid = the P's id, or pid_ms with tid = the M's id
// (tid_plain for threads that are not Ms).
struct track_key {
  int pid;
  std::int64_t tid;
};

struct track_state {
  bool seen = false;
  bool open = false;
};

struct writer {
  json_out out;
  double us_per_tick = 0.001;
  std::uint64_t origin = 0;
  std::unordered_map<std::uint64_t, g_info> gs;
  std::unordered_map<std::uintptr_t, std::string> symcache;
  std::vector<track_state> p_tracks, m_tracks;
  track_state plain_track;

  track_state& state(track_key t) {
    if (t.pid == pid_ms && t.tid == tid_plain) return plain_track;
    auto& v = t.pid == pid_ps ? p_tracks : m_tracks;
    auto i = std::size_t(t.tid < 0 ? 0 : t.tid);
    if (i >= v.size()) v.resize(i + 1);
    return v[i];
  }

  std::string sym(std::uintptr_t pc) {
    auto it = symcache.find(pc);
    if (it != symcache.end()) return it->second;
    std::string s = pc ? symbolize(pc).function : std::string();
    symcache.emplace(pc, s);
    return s;
  }

  void name_all() {
    json_out tmp;
    for (auto& [goid, gi] : gs) {
      std::string creator = gi.gopc ? short_name(sym(gi.gopc - 1)) : "";
      std::string n = gi.entry ? short_name(sym(gi.entry)) : "";
      if (n.empty() && !creator.empty()) n = "goroutine in " + creator;
      if (n.empty()) n = "goroutine";
      gi.name = n;
      tmp.buf.clear();
      tmp.raw("\"name\":");
      tmp.str("G" + std::to_string(goid) + " " + n);
      tmp.raw(",\"cat\":\"goroutine\",\"args\":{\"goid\":");
      tmp.num(goid);
      tmp.raw(",\"function\":");
      tmp.str(n);
      if (gi.parent) {
        tmp.raw(",\"parent\":");
        tmp.num(gi.parent);
      }
      if (gi.gopc) {
        tmp.raw(",\"created_by\":");
        tmp.str(creator);
      }
      tmp.raw("}");
      gi.slice_members = tmp.buf;
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

  // {"ph":"<ph>","pid":..,"tid":..,"ts":..  (the caller closes it)
  void head(char ph, track_key t, std::uint64_t ts) {
    state(t).seen = true;
    out.begin_event();
    char h[] = "{\"ph\":\"?\",\"pid\":";
    h[7] = ph;
    out.raw(h);
    out.inum(t.pid);
    out.raw(",\"tid\":");
    out.inum(t.tid);
    out.raw(",\"ts\":");
    out.micros(us(ts));
  }

  void end(track_key t, std::uint64_t ts) {
    track_state& st = state(t);
    if (!st.open) return;
    st.open = false;
    head('E', t, ts);
    out.raw(",\"name\":\"\"}");
  }

  void begin(track_key t, std::uint64_t ts, std::uint64_t goid,
             const char* what) {
    end(t, ts);
    state(t).open = true;
    head('B', t, ts);
    out.raw(",");
    auto it = gs.find(goid);
    if (what[0] == 0 && it != gs.end()) {
      out.raw(it->second.slice_members);
    } else {
      out.raw("\"name\":");
      out.str(std::string(what) + gname(goid));
      out.raw(what[0] ? ",\"cat\":\"syscall\"" : ",\"cat\":\"goroutine\"");
      out.raw(",\"args\":{\"goid\":");
      out.num(goid);
      if (it != gs.end()) {
        out.raw(",\"function\":");
        out.str(it->second.name);
      }
      out.raw("}");
    }
    out.raw("}");
  }

  // An instant event: name, category, and `args` members written by fn.
  template <class Name, class Args>
  void instant(track_key t, std::uint64_t ts, Name&& name, const char* cat,
               Args&& args) {
    head('i', t, ts);
    out.raw(",\"name\":\"");
    name();
    out.raw("\",\"s\":\"t\",\"cat\":\"");
    out.raw(cat);
    out.raw("\",\"args\":{");
    args();
    out.raw("}}");
  }

  static track_key p_track(std::int64_t p) { return {pid_ps, p}; }
  static track_key m_track(std::uint32_t m) {
    return {pid_ms, m == UINT32_MAX ? tid_plain : std::int64_t(m)};
  }
  // Where an instant goes: the P's track, else the thread's.
  static track_key where(const trace_event& e) {
    return e.p >= 0 ? p_track(e.p) : m_track(e.m);
  }

  void goid_arg(std::uint64_t goid) {
    out.raw("\"goid\":");
    out.num(goid);
  }

  void event(const trace_event& e) {
    track_key pt = p_track(e.p), mt = m_track(e.m);
    auto gid = [&] {
      out.raw("G");
      out.num(e.goid);
    };
    switch (e.type) {
      case trace_ev::none:
      case trace_ev::go_exists:
      case trace_ev::proc_m:     // consumed by the decoder
      case trace_ev::go_site:    // consumed by the decoder
      case trace_ev::proc_stop:  // consumed by the decoder
        break;
      case trace_ev::go_running:
      case trace_ev::go_start:
        if (e.p >= 0) begin(pt, e.ts, e.goid, "");
        begin(mt, e.ts, e.goid, "");
        break;
      case trace_ev::go_create:
        instant(
            where(e), e.ts,
            [&] {
              out.raw("go ");
              gid();
              if (e.arg) {
                out.raw(" (from G");
                out.num(e.arg);
                out.raw(")");
              } else {
                out.raw(" (from a thread)");
              }
            },
            "spawn",
            [&] {
              goid_arg(e.goid);
              out.raw(",\"parent\":");
              out.num(e.arg);
            });
        break;
      case trace_ev::go_park: {
        const char* r = wait_reason_string(wait_reason(e.aux));
        if (e.p >= 0) end(pt, e.ts);
        end(mt, e.ts);
        instant(
            where(e), e.ts,
            [&] {
              out.raw("park ");
              gid();
              out.raw(" [");
              out.raw(r);
              out.raw("]");
            },
            "park",
            [&] {
              goid_arg(e.goid);
              out.raw(",\"reason\":\"");
              out.raw(r);
              out.raw("\"");
            });
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
        instant(
            where(e), e.ts,
            [&] {
              out.raw("preempt ");
              gid();
            },
            "preempt",
            [&] {
              goid_arg(e.goid);
              out.raw(e.aux == 1 ? ",\"how\":\"signal\""
                                 : ",\"how\":\"safe point\"");
            });
        break;
      case trace_ev::go_unpark: {
        auto waker = [&] {
          if (e.arg) {
            out.raw("G");
            out.num(e.arg);
          } else {
            out.raw(e.aux == 1 ? "netpoll" : "runtime");
          }
        };
        instant(
            where(e), e.ts,
            [&] {
              out.raw("unpark ");
              gid();
              out.raw(" by ");
              waker();
            },
            "unpark",
            [&] {
              goid_arg(e.goid);
              out.raw(",\"waker\":");
              out.num(e.arg);
              out.raw(",\"waker_name\":\"");
              waker();
              out.raw("\"");
            });
        break;
      }
      case trace_ev::steal:
        instant(
            where(e), e.ts,
            [&] {
              out.raw("steal ");
              gid();
              out.raw(" from P");
              out.num(e.arg);
            },
            "steal",
            [&] {
              goid_arg(e.goid);
              out.raw(",\"victim\":");
              out.num(e.arg);
            });
        break;
      case trace_ev::sys_enter:
      case trace_ev::sys_block:
        if (e.p >= 0) end(pt, e.ts);
        begin(mt, e.ts, e.goid, "syscall ");
        if (e.type == trace_ev::sys_block)
          instant(
              mt, e.ts,
              [&] {
                out.raw("blocking call ");
                gid();
              },
              "syscall", [&] { goid_arg(e.goid); });
        break;
      case trace_ev::sys_exit:
        end(mt, e.ts);
        if (e.aux == 1) {
          if (e.p >= 0) begin(pt, e.ts, e.goid, "");
          begin(mt, e.ts, e.goid, "");
        }
        break;
      case trace_ev::handoff:
        instant(
            p_track(std::int64_t(e.arg)), e.ts,
            [&] {
              out.raw("handoff P");
              out.num(e.arg);
            },
            "syscall",
            [&] {
              out.raw("\"p\":");
              out.num(e.arg);
              out.raw(",\"m\":");
              out.inum(mt.tid);
            });
        break;
      case trace_ev::preempt_req:
        instant(
            p_track(std::int64_t(e.arg)), e.ts,
            [&] {
              out.raw("preempt request ");
              gid();
            },
            "preempt", [&] { goid_arg(e.goid); });
        break;
      case trace_ev::netpoll:
        instant(
            where(e), e.ts,
            [&] {
              out.raw("netpoll: ");
              out.num(e.arg);
              out.raw(" ready");
            },
            "netpoll",
            [&] {
              out.raw("\"ready\":");
              out.num(e.arg);
            });
        break;
    }
  }

  // Slices still open when tracing stopped end at `ts`.
  void end_all(std::uint64_t ts) {
    for (std::size_t i = 0; i < p_tracks.size(); i++)
      end(p_track(std::int64_t(i)), ts);
    for (std::size_t i = 0; i < m_tracks.size(); i++)
      end({pid_ms, std::int64_t(i)}, ts);
    end({pid_ms, tid_plain}, ts);
  }

  void metadata() {
    auto name = [&](const char* what, int pid, std::int64_t tid,
                    const std::string& n, bool thread) {
      out.begin_event();
      out.raw("{\"ph\":\"M\",\"name\":\"");
      out.raw(what);
      out.raw("\",\"pid\":");
      out.inum(pid);
      if (thread) {
        out.raw(",\"tid\":");
        out.inum(tid);
      }
      out.raw(",\"args\":{\"name\":");
      out.str(n);
      out.raw("}}");
    };
    name("process_name", pid_ps, 0, "goro Ps", false);
    name("process_name", pid_ms, 0, "goro threads (Ms)", false);
    for (std::size_t i = 0; i < p_tracks.size(); i++)
      if (p_tracks[i].seen)
        name("thread_name", pid_ps, std::int64_t(i), "P" + std::to_string(i),
             true);
    for (std::size_t i = 0; i < m_tracks.size(); i++)
      if (m_tracks[i].seen)
        name("thread_name", pid_ms, std::int64_t(i), "M" + std::to_string(i),
             true);
    if (plain_track.seen)
      name("thread_name", pid_ms, tid_plain, "plain threads", true);
  }
};

void write_json(std::FILE* f, std::vector<trace_event>& evs,
                std::uint64_t dropped) {
  std::stable_sort(
      evs.begin(), evs.end(),
      [](const trace_event& a, const trace_event& b) { return a.ts < b.ts; });
  writer w;
  w.out.f = f;
  w.out.buf.reserve(2 << 20);
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
  w.out.raw("{\"traceEvents\":[");
  for (const trace_event& e : evs) w.event(e);
  // Slices still open when tracing stopped end there.
  std::uint64_t stop_ts = clock1;
  if (!evs.empty() && evs.back().ts > stop_ts) stop_ts = evs.back().ts;
  w.end_all(stop_ts);
  w.metadata();
  w.out.raw(
      "\n],\"displayTimeUnit\":\"ns\",\"otherData\":{\"producer\":"
      "\"goro\",\"clock\":\"");
  w.out.raw(use_tsc ? "tsc" : "monotonic");
  w.out.raw("\",\"events\":");
  w.out.num(evs.size());
  w.out.raw(",\"dropped\":");
  w.out.num(dropped);
  w.out.raw(",\"interpolated\":");
  w.out.num(interpolated);
  w.out.raw("}}\n");
  w.out.flush();
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
  state = ctl_state::on;
  std::atexit(env_stop_at_exit);
}

void trace_env_stop() {
  {
    std::lock_guard<std::mutex> lk(ctl_mu);
    if (!env_started || state != ctl_state::on) return;
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
  {
    std::lock_guard<std::mutex> lk(ctl_mu);
    if (state == ctl_state::stopping)
      throw std::logic_error(
          "goro::trace::start: the previous trace is still being written (to " +
          out_path + ")");
    if (state != ctl_state::idle)
      throw std::logic_error(
          "goro::trace::start: a trace is already being taken (into " +
          out_path + ")");
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
    state = ctl_state::starting;
  }
  stop_the_world();
  arm();
  start_the_world(0);
  std::lock_guard<std::mutex> lk(ctl_mu);
  state = ctl_state::on;
}

void stop() {
  using namespace rt;
  {
    std::lock_guard<std::mutex> lk(ctl_mu);
    if (state != ctl_state::on)
      throw std::logic_error("goro::trace::stop: no trace is being taken");
    state = ctl_state::stopping;
    env_started = false;
  }
  stop_the_world();
  std::uint64_t dropped = disarm();
  start_the_world(0);
  // Decoding and writing take a quarter of a second of CPU per million
  // switches, and the file may be a pipe or a slow disk: done as a blocking
  // call (goro::blocking), so that the P runs other goroutines meanwhile
  // when sysmon sees the call last (as Go's trace reader writes from a
  // goroutine that blocks in write without holding up the program).
  struct back_to_idle {
    ~back_to_idle() {
      std::lock_guard<std::mutex> lk(ctl_mu);
      state = ctl_state::idle;
    }
  } idle_after;
  blocking_scope in_call;
  finish(dropped);
}

bool active() { return rt::trace_on.load(std::memory_order_acquire); }

trace_stats last_stats() {
  std::lock_guard<std::mutex> lk(rt::ctl_mu);
  return rt::last;
}

}  // namespace goro::trace
