// globrunq.hpp: test hooks for the global run queue (sched.runq). The
// queue itself is manipulated under sched.lock through sched.hpp.
#pragma once

#include <cstddef>

#include "runtime/g.hpp"

namespace goro::rt {

std::size_t globrunqsize();
G* globrunqget_for_test();

}  // namespace goro::rt
