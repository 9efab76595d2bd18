// lockosthread.hpp: locked threads (lockosthread.cpp: stoplockedm,
// startlockedm, incidlelocked).
#pragma once

#include <cstdint>

#include "runtime/g.hpp"

namespace goro::rt {

void stoplockedm();
void startlockedm(G* gp);
void incidlelocked(std::int32_t v);  // sched.lock held

}  // namespace goro::rt
