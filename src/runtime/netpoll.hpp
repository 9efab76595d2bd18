// netpoll.hpp: the network poller (Go's netpoll.go / netpoll_epoll.go).
// It is not a thread: an idle M with nothing to run blocks in epoll_wait
// until the next timer, and anyone can break it out of that wait. The
// pollDesc side (sockets) comes with the network issue; the poller is
// already the scheduler's timed idle wait.
#pragma once

#include <cstdint>

#include "runtime/g.hpp"

namespace goro::rt {

void netpollinit();
bool netpollinited();
// Waits up to delay ns (< 0: forever, 0: poll) and returns the goroutines
// made ready. Called with no P.
g_queue netpoll(std::int64_t delay);
// Wakes an M blocked in netpoll (coalesced).
void netpollbreak();
// Goroutines waiting on descriptors (none until goro::net exists).
bool netpoll_any_waiters();
// If an M sleeps in netpoll past `when`, break it; if none polls, wake an
// M so the new timer gets serviced (Go's wakeNetPoller).
void wake_netpoller(std::int64_t when);

}  // namespace goro::rt
