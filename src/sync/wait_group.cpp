// wait_group.cpp: Go's sync.WaitGroup over the runtime semaphore.
#include <goro/wait_group.hpp>
#include <stdexcept>

#include "runtime/preempt.hpp"
#include "runtime/sema.hpp"

namespace goro {

void wait_group::add(std::int64_t delta) {
  rt::plain_thread_entry();
  const std::uint64_t d = static_cast<std::uint64_t>(delta) << 32;
  std::uint64_t state = state_.fetch_add(d) + d;
  auto v = static_cast<std::int32_t>(state >> 32);
  auto w = static_cast<std::uint32_t>(state);
  if (v < 0) {
    state_.fetch_sub(d);  // undo, leaving the group as it was
    throw std::logic_error("sync: negative WaitGroup counter");
  }
  if (w != 0 && delta > 0 && v == static_cast<std::int32_t>(delta))
    throw std::logic_error(
        "sync: WaitGroup misuse: Add called concurrently with Wait");
  if (v > 0 || w == 0) return;
  // The counter reached zero with waiters: nobody may add or wait now.
  if (state_.load() != state)
    throw std::logic_error(
        "sync: WaitGroup misuse: Add called concurrently with Wait");
  state_.store(0);
  for (; w != 0; w--) rt::semrelease(&sema_, false);
}

void wait_group::wait() {
  for (;;) {
    std::uint64_t state = state_.load();
    if ((state >> 32) == 0) return;
    if (state_.compare_exchange_weak(state, state + 1)) {
      rt::semacquire(&sema_, rt::wait_reason::sync_wait_group_wait);
      if (state_.load() != 0)
        throw std::logic_error(
            "sync: WaitGroup is reused before previous Wait has returned");
      return;
    }
  }
}

}  // namespace goro
