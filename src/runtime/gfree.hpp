// gfree.hpp: dead Gs kept with their stacks for reuse (gfree.cpp: gfput,
// gfget), and Gs without stacks for new goroutines.
#pragma once

#include "runtime/g.hpp"
#include "runtime/p.hpp"

namespace goro::rt {

G* gfget(P* pp);
void gfput(P* pp, G* gp);
// gfput, or the global list / unmap when there is no P (plain threads).
void gfput_or_free(P* pp, G* gp);
// Stackless Gs for new goroutines, cached per P in batches (pp may be
// null: then straight from or to the global list).
G* gfget_nostack(P* pp);
void gfput_nostack(P* pp, G* gp);

}  // namespace goro::rt
