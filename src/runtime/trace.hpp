// trace.hpp: the execution tracer's hooks (Go's trace.go traceGoCreate,
// traceGoStart, traceGoPark, traceGoUnpark, ...), the event hook of the
// brief where G/M/P transitions are recorded. trace.cpp keeps the buffers
// and writes Chrome Trace Event JSON.
//
// Cost while tracing is off: every hook is an inline function that loads
// one global flag (relaxed) and branches over a call to its out-of-line,
// cold recorder; the arguments are the pointers the caller already holds,
// so nothing is computed for a trace that is not taken.
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

namespace goro::rt {

struct G;
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
// to 31, bit 5 set): bits 0-4 the type, bit 7 "interpolated", bits 8-15 the
// aux value, bits 16-31 the goid minus the goid of the P's previous
// goroutine record (go_create, go_start, go_park, go_preempt, go_end,
// go_unpark, steal; trace_cursor::last_goid), taken when that fits 16 bits
// signed and the aux value 8 bits: the goroutines of a P's switches are
// mostly a few ids apart, so most records cost 4 bytes of fresh memory.
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
// after a clock read that closes a window of at most dense_ticks per record
// (trace.cpp), up to burst_records such records are written without a
// time, and the decoder spreads them evenly between the two clock reads
// around them. The error of an interpolated time is therefore bounded by
// its window's span, which the decoder knows. A window stays short because
// the skipping also stops when the burst ends (a record whose window was
// not dense is followed by clock reads only) and when sysmon has ticked
// trace_epoch since the P's last clock read: a long slice inside a burst
// (longer than one sysmon round, at most 1 ms while goroutines run) is
// closed by a clock read, and the decoder then places the burst's records
// at the burst's own pace and gives the rest of the span to the last one.
// GORO_TRACE_EXACT=1 reads the clock for every timed record.
//
// The P, the M, a waker's and a parent's goid are not stored: the decoder
// knows them from the P's stream (the chunk's owner, the last proc_m, the
// goroutine the P is running). An untimed record borrows the next timed
// record's time on its P (a park, an exit or a preemption is followed at
// once by schedule(), whose go_start is timed; a P that finds no work
// records proc_stop when it is released), which saves one clock read per
// switch.
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

// A P's write position in its current chunk (owner-only). pos == end means
// "take a new chunk"; both are null while tracing is off. m, site_*: what
// the stream last said (proc_m, go_site), so repeats are not recorded.
struct trace_cursor {
  std::uint32_t* pos = nullptr;  // records are 1, 2, 4 or 6 units of 4 bytes
  std::uint32_t* end = nullptr;
  std::uint64_t dropped = 0;  // events lost once the buffer cap was reached
  std::int64_t m = -1;
  std::uint64_t last_ts = 0;  // the clock at the last timed record
  std::uintptr_t site_entry = 0;
  std::uintptr_t site_gopc = 0;
  std::uint32_t burst = 0;   // interpolated records allowed before a clock read
  std::uint32_t interp = 0;  // interpolated records since the last clock read
  std::uint32_t epoch = 0;   // trace_epoch at the last clock read
  std::uint64_t last_goid = 0;  // the goid of the last goroutine record
};

extern std::atomic<bool> trace_on;
inline bool tracing() { return trace_on.load(std::memory_order_relaxed); }

// Advanced by sysmon on every round while tracing (sysmon then sleeps at
// most 1 ms between rounds while any P runs goroutines): a P whose last clock
// read is older than the current epoch reads the clock again (see "Interpolated
// records").
extern std::atomic<std::uint32_t> trace_epoch;
// The density under which records skip the clock, in ticks per record
// (1024), as a trace reads it when it starts: tests raise it so that
// bursts form in sanitized builds too, whose switches are slower.
extern std::uint64_t trace_dense_ticks;
inline void trace_tick() {
  if (tracing()) [[unlikely]]
    trace_epoch.store(trace_epoch.load(std::memory_order_relaxed) + 1,
                      std::memory_order_relaxed);
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

// The hooks: one flag test each when tracing is off.
#define GORO_TRACE_HOOK(name, params, args) \
  inline void name params {                 \
    if (tracing()) [[unlikely]]             \
      name##_slow args;                     \
  }
GORO_TRACE_HOOK(trace_go_create, (G * gp, G* parent), (gp, parent))
GORO_TRACE_HOOK(trace_go_start, (G * gp), (gp))
GORO_TRACE_HOOK(trace_go_park, (G * gp), (gp))
GORO_TRACE_HOOK(trace_go_preempt, (G * gp, bool async), (gp, async))
GORO_TRACE_HOOK(trace_go_end, (G * gp), (gp))
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
