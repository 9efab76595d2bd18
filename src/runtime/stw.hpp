// stw.hpp: stop-the-world (stw.cpp: stopTheWorld, startTheWorld, gcstopm).
#pragma once

#include <cstdint>

namespace goro::rt {

// A P reached _Pgcstop for a pending stop-the-world (sched.lock held).
void stw_p_stopped();
void gcstopm();
void stop_the_world();
void start_the_world(std::int32_t newprocs);

}  // namespace goro::rt
