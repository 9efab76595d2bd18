// trace.hpp: the execution tracer's hooks (Go's trace.go traceGoCreate,
// traceGoStart, traceGoPark, traceGoUnpark, ...), the event hook of the
// brief where G/M/P transitions are recorded. trace.cpp keeps the buffers
// and writes Chrome Trace Event JSON.
//
// Cost while tracing is off: every hook is an inline function that loads
// one global flag (relaxed) and branches over its recording code; the
// arguments are the pointers the caller already holds, so nothing is
// computed for a trace that is not taken. While tracing, the hooks of the
// switch path (start, exit, park, spawn, wake-up) write their usual 4-byte
// record inline (a few loads, one store); the rest, and whatever those
// cannot write (a clock read, a long record, a new chunk), go to the
// out-of-line recorders in trace.cpp.
//
// A yield (gosched, goyield) records nothing: the yielding goroutine is
// queued and its M goes straight to schedule(), so the next go_start on
// the same P ends its slice at nearly the same instant; that saves a
// timestamp on the most frequent switch (the tracer's cost is dominated by
// one rdtsc per timed record).
//
// Recording (tracing on): an event goes into the buffer of the P the
// calling thread holds, with no lock: only the P's owner writes its
// cursor, and P ownership passes between threads with the scheduler's own
// synchronisation. A thread without a P (sysmon, a thread in or leaving a
// blocking call, a plain thread) records into one small buffer under a
// spin lock. Starting and stopping stop the world, so no recorder is in
// flight while buffers are set up or read.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"

namespace goro::rt {

struct P;

enum class trace_ev : std::uint8_t {
  none = 0,     // unused slot (a chunk's free tail is zeroed memory)
  go_create,    // goid: the new goroutine; parent: the P's running G
  go_start,     // goid starts running on this P
  go_park,      // goid parks; aux: wait_reason
  go_yield,     // (not recorded: a yield's slice ends at the P's next start)
  go_preempt,   // goid preempted; aux: 0 at a safe point, 1 by signal
  go_end,       // goid exits
  go_unpark,    // goid made runnable; aux: unpark_by (the waker)
  steal,        // goid stolen by this P; aux: the victim P's id
  sys_enter,    // goid enters a blocking call; the P stays behind
  sys_exit,     // goid leaves it; aux: 1 if it got a P at once (runs on)
  sys_block,    // goid enters a call known to block: P handed off at once
  handoff,      // aux: the P handed off from a blocking call
  preempt_req,  // sysmon asks goid to yield; aux: its P
  netpoll,      // goid field: goroutines the network poller made ready
  go_exists,    // goid existed when tracing started (decoded form only)
  go_running,   // goid was running on this P when tracing started
  proc_m,       // this P is now held by the M whose id is in the goid field
  go_site,      // wide: the next slot holds {entry, gopc} of the goroutines
                // this P creates from here on
  proc_stop,    // the M lets go of this P (releasep): a timed record that
                // ends the borrowing of untimed records before it
};

// Who made a goroutine runnable (go_unpark's aux).
enum unpark_by : std::uint8_t {
  unpark_by_g = 0,        // the goroutine running on the recording P
  unpark_by_netpoll = 1,  // the network poller
  unpark_by_runtime = 2,  // the scheduler itself (timers, no goroutine)
};

// A P's records: a stream of 4-byte units, written with no lock by the P's
// owner. A record is one unit (short), two (a word) or four (wide).
// A word: bits 0-5 the type, bit 6 "wide", bit 7 "interpolated", bits
// 8-31 a 24-bit field, bits 32-63 the goid. The field of a timed record is
// the trace clock ticks since the P's previous timed record; of an untimed
// one (go_park, go_end, go_preempt) or an interpolated one, its aux value.
// A short record is an untimed or interpolated goroutine record (types up
// to 31, bit 5 set): bits 0-4 the type, bit 7 "interpolated", bits 8-15
// the aux value, bits 16-31 the goid minus a reference goid
// (trace_goid_refs: for go_park, go_end and go_preempt, the goid of the
// P's last go_start; for go_create, go_start, go_unpark and steal, that of
// the P's last record of one of these four), taken when that fits 16 bits
// signed and the aux value 8 bits: the goroutines of a P's switches are
// mostly a few ids apart, so most records cost 4 bytes of fresh memory.
// Two folds make a switch cheaper still (trace_cursor::stopped, ::woke):
// - a go_start's aux bits 10-15 say that the goroutine of the P's last
//   go_start stopped just before: 1 it exited, 2 + r it parked with wait
//   reason r (0: nothing folded; bits 8-9 are 0);
// - a go_create or go_unpark (aux 0-3: who woke it) with bit 6 set is also
//   the go_start of the same goroutine, the P's next record, with the
//   stop of the goroutine before it in bits 10-15 as in a go_start: a
//   spawn chain's step or a channel hand-off is then one unit, not two.
// Bit 6 is clear in every other short record.
// A wide record is a word followed by a second word: the time in full (56
// bits; 0 for an untimed record) and goid bits 32-39 (a goid of 2^40 or
// more is shown truncated); its field is the aux value. Wide: a timed
// record with an aux value, a time step of 2^24 ticks or more, a goid of
// 2^32 or more, and the proc_m that opens each chunk (the time base for the
// steps after it). go_site is three words (type, entry, gopc). Words are
// stored at 4-byte alignment.
//
// Interpolated records (bursts). The clock read is most of what a record
// costs (one rdtsc: 10-25 ns, against a 50 ns switch). So where a P's
// records come densely, go_start, go_create, go_unpark and steal skip it:
// after a clock read that closes a dense window (at most dense_ticks per
// unit of the stream written since the previous read, trace.cpp), such
// records are written without a time in the next burst_units units, and
// the decoder spreads them evenly between the two clock reads around them.
// The error of an interpolated time is therefore bounded by its window's
// span, which the decoder knows. A window stays short because the skipping
// also stops when the burst ends (a record whose window was not dense is
// followed by clock reads only) and after each sysmon round, which ends
// every P's burst: a long slice inside a burst (longer than one sysmon
// round, at most 1 ms while goroutines run) is closed by a clock read, and
// the decoder then places the burst's records at the burst's own pace and
// gives the rest of the span to the last one.
// GORO_TRACE_EXACT=1 reads the clock for every timed record.
//
// The P, the M, a waker's and a parent's goid are not stored: the decoder
// knows them from the P's stream (the chunk's owner, the last proc_m, the
// goroutine the P is running). An untimed record borrows the next timed
// record's time on its P (a park, an exit or a preemption is followed at
// once by schedule(), whose go_start is timed; a P that finds no work
// records proc_stop when it is released), which saves one clock read per
// switch. A park or an exit of the running goroutine is not even a record
// of its own when the P's next record is a short go_start: it rides in
// that record's aux (trace_cursor::stopped), so a switch costs one unit,
// and none when the goroutine started is the one the P's last unit
// created or woke (that unit says so, trace_cursor::woke).
// The decoded form (and the record of threads without a P, which have no
// stream to derive from): 32 bytes. p: the P (-1: no P); m: the M's id
// (UINT32_MAX: a plain thread). ts: raw trace_clock() ticks.
struct trace_event {
  std::uint64_t ts;
  std::uint64_t goid;
  std::uint64_t arg;
  std::uint32_t m;
  trace_ev type;
  std::uint8_t aux;
  std::int16_t p;
};
static_assert(sizeof(trace_event) == 32);

// The reference goids of short records (see "A P's records"), kept alike
// by the recorder (trace_cursor) and the decoder along a P's stream. A
// park, an exit or a preemption is the running goroutine's, so it refers
// to the last start (a leaf that wakes a far-away parent and exits still
// writes a short exit); the others to the last of their kind.
struct trace_goid_refs {
  std::uint64_t last = 0;  // last go_create, go_start, go_unpark or steal
  std::uint64_t run = 0;   // last go_start
  static constexpr bool of_running(trace_ev t) {
    return t == trace_ev::go_park || t == trace_ev::go_end ||
           t == trace_ev::go_preempt;
  }
  std::uint64_t ref(trace_ev t) const { return of_running(t) ? run : last; }
  void note(trace_ev t, std::uint64_t goid) {
    if (t == trace_ev::go_start) run = goid;
    if (t == trace_ev::go_start || t == trace_ev::go_create ||
        t == trace_ev::go_unpark || t == trace_ev::steal)
      last = goid;
  }
};

// A P's write position in its current chunk (owner-only, but for lim).
// pos == end means "take a new chunk"; both are null while tracing is off.
// m, site_*: what the stream last said (proc_m, go_site), so repeats are
// not recorded.
struct trace_cursor {
  std::uint32_t* pos = nullptr;  // records are 1, 2, 4 or 6 units of 4 bytes
  std::uint32_t* end = nullptr;
  // A burst: interpolated records may be written while pos < lim (lim <=
  // end; null: not in a burst). Set by the owner at each clock read; sysmon
  // nulls it on every round (trace_tick), so both sides use __atomic
  // builtins. A null stored while the owner reads the clock can be
  // overwritten by the new lim: that burst starts from a fresh read anyway.
  std::uint32_t* lim = nullptr;
  std::uint32_t* read_pos = nullptr;  // pos just after the last timed record
  std::uint64_t dropped = 0;  // events lost once the buffer cap was reached
  std::int64_t m = -1;
  std::uint64_t last_ts = 0;  // the clock at the last timed record
  std::uintptr_t site_entry = 0;
  std::uintptr_t site_gopc = 0;
  trace_goid_refs refs;
  // The goroutine of refs.run has stopped (exited or parked) and its
  // go_end or go_park is not written yet: the stop's code (1: an exit, 2 +
  // the wait reason: a park) at bits 10-15 (trace_stop_shift), as a short
  // go_start carries it. The next go_start's short record carries it (a
  // switch is then one unit); any other record writes it first, as a
  // record of its own (flush_stop in trace.cpp). Else 0.
  std::uint32_t stopped = 0;
  // Where the P's last short go_create or go_unpark (always interpolated)
  // was written: while that is still the P's last unit, the go_start of
  // the same goroutine folds into it (trace_fold_start). Only compared
  // with pos, never read through once pos has moved past it.
  std::uint32_t* woke = nullptr;
};

extern std::atomic<bool> trace_on;
inline bool tracing() { return trace_on.load(std::memory_order_relaxed); }

// Advanced by sysmon on every round while tracing (sysmon then sleeps at
// most 1 ms between rounds while any P runs goroutines), after it has
// ended every P's burst (trace_cursor::lim): a P's next record after a
// round reads the clock (see "Interpolated records").
extern std::atomic<std::uint32_t> trace_epoch;
// The density under which records skip the clock, in ticks per unit of
// the P's stream (512), as a trace reads it when it starts: tests raise it
// so that bursts form in sanitized builds too, whose switches are slower.
extern std::uint64_t trace_dense_ticks;
void trace_tick_slow();
inline void trace_tick() {
  if (tracing()) [[unlikely]]
    trace_tick_slow();
}

// Start/stop from the environment (GORO_TRACE=<file>): called at runtime
// start, and when goro::run returns or the process exits. They report
// problems on stderr and never throw.
void trace_env_start();
void trace_env_stop();

// Out-of-line recorders (trace.cpp); called only while tracing.
void trace_go_create_slow(G* gp, G* parent);
void trace_go_start_slow(G* gp);
void trace_go_park_slow(G* gp);
void trace_go_preempt_slow(G* gp, bool async);
void trace_go_end_slow(G* gp);
void trace_go_unpark_slow(G* gp);
void trace_steal_slow(G* gp, P* victim);
void trace_sys_enter_slow(G* gp);
void trace_sys_exit_slow(G* gp, bool got_p);
void trace_sys_block_slow(G* gp);
void trace_handoff_slow(P* pp);
void trace_preempt_req_slow(G* gp, P* pp);
void trace_netpoll_slow(G* first, std::int32_t n);
void trace_proc_m_slow(P* pp);
void trace_proc_stop_slow(P* pp);

// The record layout's flag bits (see "A P's records").
constexpr std::uint32_t trace_rec_short = 0x20;
constexpr std::uint32_t trace_rec_interp = 0x80;
// Bit 6 of a short go_create or go_unpark: the goroutine starts right
// after (a folded go_start).
constexpr std::uint32_t trace_rec_started = 0x40;
// A folded stop's code in a short record's bits 10-15 (the top 6 bits of
// its aux): 1 an exit, 2 + the wait reason a park.
constexpr int trace_stop_shift = 10;
constexpr std::uint32_t trace_stop_exit = 1;
constexpr std::uint32_t trace_stop_park(wait_reason r) {
  return std::uint32_t(r) + 2;
}
static_assert(trace_stop_park(wait_reason::context) < 64);
// The record a stop's code stands for (recorder's flush_stop, decoder).
struct trace_stop {
  trace_ev type;
  std::uint32_t aux;  // a park's wait reason
};
constexpr trace_stop trace_stop_of(std::uint32_t code) {
  return code == trace_stop_exit ? trace_stop{trace_ev::go_end, 0}
                                 : trace_stop{trace_ev::go_park, code - 2};
}
// The aux of a short go_create or go_unpark (unpark_by) keeps to bits 8-9.
static_assert(unpark_by_runtime < 4);

// The recording fast path, inline in the hooks of the switch path (start,
// end, park, create): a short record, written if a unit is free (pos ==
// end also while the P has no chunk), the goid is within 2^15 of its
// reference (trace_goid_refs) and aux fits 8 bits. Else nothing is written
// and the hook calls its out-of-line recorder, which takes a chunk, reads
// the clock or writes a longer record.
// A go_start also carries a pending exit or park (trace_cursor::stopped,
// in its aux's top bits); any other record leaves that to the out-of-line
// recorders, which write it first. A go_create or go_unpark is noted as
// the unit a go_start may fold into (trace_cursor::woke).
[[gnu::always_inline]] inline bool trace_put_unit(trace_cursor& c,
                                                  trace_ev type,
                                                  std::uint32_t flags,
                                                  std::uint64_t goid,
                                                  std::uint32_t aux) {
  std::uint64_t d = goid - c.refs.ref(type);
  if (d + 0x8000 > 0xffff || aux > 0xff) return false;
  if (type == trace_ev::go_start) {
    flags |= c.stopped;
    c.stopped = 0;
  } else if (c.stopped != 0) {
    return false;
  }
  c.refs.note(type, goid);
  if (type == trace_ev::go_create || type == trace_ev::go_unpark)
    c.woke = c.pos;
  *c.pos++ = std::uint32_t(type) | flags | trace_rec_short | aux << 8 |
             std::uint32_t(d) << 16;
  return true;
}
[[gnu::always_inline]] inline bool trace_put_short(trace_cursor& c,
                                                   trace_ev type,
                                                   std::uint64_t goid,
                                                   std::uint32_t aux) {
  return c.pos != c.end && trace_put_unit(c, type, 0, goid, aux);
}
// An interpolated record, while the P is in a burst (see "Interpolated
// records"); lim <= end, so a unit is free. Relaxed: sysmon's null only
// has to be seen eventually; a stale lim makes one more record
// interpolated within the same bound.
[[gnu::always_inline]] inline bool trace_put_burst(trace_cursor& c,
                                                   trace_ev type,
                                                   std::uint64_t goid,
                                                   std::uint32_t aux) {
  return c.pos < __atomic_load_n(&c.lim, __ATOMIC_RELAXED) &&
         trace_put_unit(c, type, trace_rec_interp, goid, aux);
}

// A go_start folds into the P's last unit when that unit created or woke
// the same goroutine in the current burst (trace_cursor::woke; the start
// then shares its interpolated time, and carries the pending stop);
// otherwise it is a unit of its own.
[[gnu::always_inline]] inline bool trace_fold_start(trace_cursor& c,
                                                    std::uint64_t goid) {
  std::uint32_t* pos = c.pos;
  if (reinterpret_cast<std::uintptr_t>(c.woke) + sizeof(std::uint32_t) !=
          reinterpret_cast<std::uintptr_t>(pos) ||
      goid != c.refs.last || pos >= __atomic_load_n(&c.lim, __ATOMIC_RELAXED))
    return false;
  *c.woke |= trace_rec_started | c.stopped;
  c.stopped = 0;
  c.woke = nullptr;  // a second start of it (after a yield) is a unit
  c.refs.run = goid;
  return true;
}
// The hooks: one flag test each when tracing is off. Those of the switch
// path take the P their caller holds (null: none) and record inline when
// they can; the others go out of line at once. The inline ones are
// templates only to reach pp->trace: P (p.hpp) includes this header for
// trace_cursor, so it is complete where they are called, not here.
template <class P_>
inline void trace_go_start(P_* pp, G* gp) {
  if (tracing()) [[unlikely]]
    if (!trace_fold_start(pp->trace, gp->goid) &&
        !trace_put_burst(pp->trace, trace_ev::go_start, gp->goid, 0))
      trace_go_start_slow(gp);
}
// The exit or park of the goroutine the P's last go_start started waits
// for the P's next record (trace_cursor::stopped); false (the caller
// records it out of line) for another goroutine or with one already
// waiting. code: trace_stop_exit, or 2 + the wait reason.
[[gnu::always_inline]] inline bool trace_hold_stop(trace_cursor& c,
                                                   std::uint64_t goid,
                                                   std::uint32_t code) {
  if (goid != c.refs.run || c.stopped != 0) return false;
  c.stopped = code << trace_stop_shift;
  return true;
}
template <class P_>
inline void trace_go_end(P_* pp, G* gp) {
  if (tracing()) [[unlikely]]
    if (!trace_hold_stop(pp->trace, gp->goid, trace_stop_exit))
      trace_go_end_slow(gp);
}
template <class P_>
inline void trace_go_park(P_* pp, G* gp) {
  // pp is null in a blocking call: out of line.
  if (tracing()) [[unlikely]]
    if (pp == nullptr || !trace_hold_stop(pp->trace, gp->goid,
                                          trace_stop_park(gp->waitreason.load(
                                              std::memory_order_relaxed))))
      trace_go_park_slow(gp);
}

template <class P_>
inline void trace_go_create(P_* pp, G* gp, G* parent) {
  if (tracing()) [[unlikely]] {
    if (pp != nullptr) {
      trace_cursor& c = pp->trace;
      // The spawn site is what the P's stream last said (else go_site
      // first, out of line).
      if (reinterpret_cast<std::uintptr_t>(gp->entry) == c.site_entry &&
          reinterpret_cast<std::uintptr_t>(gp->gopc) == c.site_gopc &&
          trace_put_burst(c, trace_ev::go_create, gp->goid,
                          parent != nullptr ? unpark_by_g : unpark_by_runtime))
        return;
    }
    trace_go_create_slow(gp, parent);
  }
}

// A wake-up by the thread holding pp, whose M is mp: the waker is the
// goroutine mp runs (none: the scheduler, e.g. a timer run by schedule()).
template <class P_, class M_>
inline void trace_go_unpark(P_* pp, M_* mp, G* gp) {
  if (tracing()) [[unlikely]]
    if (!trace_put_burst(pp->trace, trace_ev::go_unpark, gp->goid,
                         mp->curg.load(std::memory_order_relaxed) != nullptr
                             ? unpark_by_g
                             : unpark_by_runtime))
      trace_go_unpark_slow(gp);
}

#define GORO_TRACE_HOOK(name, params, args) \
  inline void name params {                 \
    if (tracing()) [[unlikely]]             \
      name##_slow args;                     \
  }
GORO_TRACE_HOOK(trace_go_preempt, (G * gp, bool async), (gp, async))
GORO_TRACE_HOOK(trace_go_unpark, (G * gp), (gp))
GORO_TRACE_HOOK(trace_steal, (G * gp, P* victim), (gp, victim))
GORO_TRACE_HOOK(trace_sys_enter, (G * gp), (gp))
GORO_TRACE_HOOK(trace_sys_exit, (G * gp, bool got_p), (gp, got_p))
GORO_TRACE_HOOK(trace_sys_block, (G * gp), (gp))
GORO_TRACE_HOOK(trace_handoff, (P * pp), (pp))
GORO_TRACE_HOOK(trace_preempt_req, (G * gp, P* pp), (gp, pp))
GORO_TRACE_HOOK(trace_netpoll, (G * first, std::int32_t n), (first, n))
GORO_TRACE_HOOK(trace_proc_m, (P * pp), (pp))
GORO_TRACE_HOOK(trace_proc_stop, (P * pp), (pp))
#undef GORO_TRACE_HOOK

}  // namespace goro::rt
