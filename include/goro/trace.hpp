// trace.hpp: the execution tracer (Go's runtime/trace), written as Chrome
// Trace Event JSON that Perfetto (ui.perfetto.dev) and chrome://tracing
// open: a track per P and per thread (M), goroutine run slices named after
// their function, spawns with their parent, parks with the wait reason,
// unparks with the waker, steals, blocking calls and P hand-offs,
// preemptions and network-poller wake-ups.
//
//   goro::trace::start("trace.json");
//   ...                       // the program runs
//   goro::trace::stop();      // writes trace.json
//
// or, for a whole program, GORO_TRACE=trace.json in the environment: tracing
// starts with the runtime and the file is written when goro::run returns (or
// at process exit for a program that never calls goro::run).
//
// Events are recorded into per-P buffers of at most GORO_TRACE_BUFFER MiB in
// all (64 by default; most events take 4 or 8 bytes: eight to sixteen million
// events); past that, events are dropped and counted (the file's metadata
// says how many).
// Times: each P reads the TSC (or CLOCK_MONOTONIC) per event, except in
// dense bursts of switches (events less than about a microsecond apart),
// where the events of the next 128 bytes of a P's buffer (32 records; a
// spawn or wake-up followed at once by the goroutine's start is one) take
// times interpolated between two clock reads (counted in
// otherData.interpolated and last_stats().interpolated).
// A burst is cut at least once a millisecond, so an interpolated time is
// off by at most the length of its window: a few microseconds in a burst,
// up to 1 ms for a slice shorter than that inside one.
// GORO_TRACE_EXACT=1 reads the clock for every event (slower on
// switch-bound programs).
// goro_tracesvg renders a trace into a standalone SVG timeline.
#pragma once

#include <cstdint>
#include <string>

namespace goro::trace {

// Starts tracing into `path` (created or truncated now, written by stop()).
// Starts the runtime if needed. Throws std::logic_error if a trace is
// already being taken (or the last one is still being written by stop()),
// std::system_error if `path` cannot be opened for writing. Briefly stops
// the world.
void start(const std::string& path);

// Stops tracing and writes the file (symbolizing goroutine functions now,
// not while recording). Throws std::logic_error if no trace is being taken,
// std::system_error if writing fails. Briefly stops the world, then writes
// as a blocking call (goro::blocking): on a goroutine, its P runs other
// goroutines while the file is written.
void stop();

// True between start() and stop().
bool active();

struct trace_stats {
  std::uint64_t events;   // events written by the last stop()
  std::uint64_t dropped;  // events lost because the buffer cap was reached
  // Events whose time was interpolated between two clock reads on their P
  // rather than read (dense bursts of switches; none under
  // GORO_TRACE_EXACT=1).
  std::uint64_t interpolated;
};
// Counts of the last trace written.
trace_stats last_stats();

}  // namespace goro::trace
