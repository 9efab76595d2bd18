// mstart.hpp: OS threads and their parking (mstart.cpp: newm, startm, stopm,
// wakep, the idle M and idle P lists, acquirep/releasep).
#pragma once

#include <cstdint>

#include "runtime/m.hpp"
#include "runtime/p.hpp"

namespace goro::rt {

void wakep();
void startm(P* pp, bool spinning);
void stopm();
void acquirep(P* pp);
P* releasep();
void pidleput(P* pp);    // sched.lock held
P* pidleget();           // sched.lock held
P* pidleget_spinning();  // sched.lock held
void mput(M* mp);        // sched.lock held
M* mget();               // sched.lock held
void newm(P* pp, bool spinning, std::int64_t id);
std::int64_t mreserve_id();  // sched.lock held
std::int32_t mcount();       // sched.lock held

}  // namespace goro::rt
