// Test helpers for channel and select tests: how many waiters are queued
// on a channel right now (read under the channel lock through the private
// hchan), so a test can tell that an operation really blocked without
// sleeping.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <goro/chan.hpp>

#include "chan/hchan.hpp"
#include "test_support.hpp"

namespace goro_test {

enum class side { senders, receivers };

// Waiters queued on ch's send or receive queue right now (ch: a chan<T> or
// a recv_chan<T>).
template <class C>
std::size_t queued(const C& ch, side s) {
  goro::detail::hchan* c = ch.raw();
  c->lock.lock();
  std::size_t n = 0;
  const goro::detail::waitq& q = s == side::senders ? c->sendq : c->recvq;
  for (goro::rt::sudog* sg = q.head(); sg != nullptr; sg = sg->next) n++;
  c->lock.unlock();
  return n;
}

// Yields until at least n waiters are queued on ch (they are blocked in a
// channel operation); fails after a generous bound.
template <class C>
::testing::AssertionResult await_queued(
    const C& ch, side s, std::size_t n,
    std::chrono::milliseconds limit = std::chrono::seconds(20)) {
  goro_test::deadline d(limit);
  std::size_t have = 0;
  while ((have = queued(ch, s)) < n) {
    if (d.passed())
      return ::testing::AssertionFailure()
             << "only " << have << " of " << n << " expected "
             << (s == side::senders ? "senders" : "receivers")
             << " ever blocked on the channel";
    goro::gosched();
  }
  return ::testing::AssertionSuccess();
}

}  // namespace goro_test
