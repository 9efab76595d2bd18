// testhook.cpp: storage for the test hooks (see testhook.hpp).
#include "runtime/testhook.hpp"

#include "runtime/coarseclock.hpp"

namespace goro::rt {

test_hooks testhooks;

void coarse_clock_advance_for_test(std::int64_t seconds) {
  testhooks.clock_offset_s.fetch_add(seconds, std::memory_order_relaxed);
  coarse_clock_update();
}

}  // namespace goro::rt
