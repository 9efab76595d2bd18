// san.hpp: sanitizer fiber annotations for the context switch and the
// per-goroutine C++ exception state. Users can run their goroutine programs
// under ASan and TSan because every switch is announced to them.
#pragma once

#include <cxxabi.h>

#include "runtime/g.hpp"
#include "runtime/m.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define GORO_HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GORO_HAVE_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define GORO_HAVE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define GORO_HAVE_TSAN 1
#endif
#endif

#ifdef GORO_HAVE_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef GORO_HAVE_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace goro::rt {

// Leaving goroutine gp for the scheduler stack of mp. `dying`: gp's stack
// will not be resumed.
inline void san_leave_g(M* mp, G* gp, bool dying) {
#ifdef GORO_HAVE_ASAN
  __sanitizer_start_switch_fiber(dying ? nullptr : &gp->asan_fake_stack,
                                 mp->g0_lo, mp->g0_size);
#endif
#ifdef GORO_HAVE_TSAN
  // g0 never returns from its frames (every mcall starts it afresh), so
  // TSan's shadow call stack for it grows by a few entries per switch.
  // Replace the fiber every few hundred uses to keep it bounded.
  if (mp->tsan_g0_cur == nullptr || ++mp->tsan_g0_uses >= 256) {
    if (mp->tsan_g0_cur != nullptr) __tsan_destroy_fiber(mp->tsan_g0_cur);
    mp->tsan_g0_cur = __tsan_create_fiber(0);
    mp->tsan_g0_uses = 0;
  }
  __tsan_switch_to_fiber(mp->tsan_g0_cur, 0);
#endif
  (void)mp;
  (void)gp;
  (void)dying;
}

// Arrived on the scheduler stack.
inline void san_enter_g0(M* mp) {
#ifdef GORO_HAVE_ASAN
  __sanitizer_finish_switch_fiber(mp->asan_g0_fake, nullptr, nullptr);
  // g0 restarts at the same address every time, abandoning the frames of
  // its previous run without their epilogues; clear their redzones.
  constexpr std::size_t span = 64 * 1024;
  __asan_unpoison_memory_region(static_cast<char*>(mp->g0_sp) - span, span);
#endif
  (void)mp;
}

// Leaving the scheduler stack for goroutine gp.
inline void san_leave_g0(M* mp, G* gp) {
#ifdef GORO_HAVE_ASAN
  __sanitizer_start_switch_fiber(&mp->asan_g0_fake,
                                 reinterpret_cast<void*>(gp->stk.lo),
                                 gp->stk.hi - gp->stk.lo);
#endif
#ifdef GORO_HAVE_TSAN
  __tsan_switch_to_fiber(gp->tsan_fiber, 0);
#endif
  (void)mp;
  (void)gp;
}

// A recycled goroutine stack still carries the redzones of the frames its
// previous goroutine abandoned when it exited; clear them before reuse.
inline void san_reuse_stack(G* gp) {
#ifdef GORO_HAVE_ASAN
  __asan_unpoison_memory_region(reinterpret_cast<void*>(gp->stk.lo),
                                gp->stk.hi - gp->stk.lo);
#endif
#ifdef GORO_HAVE_TSAN
  // Each goroutine ends without returning from its first frames; give the
  // recycled G a fresh fiber (and shadow call stack) now and then.
  if (gp->tsan_fiber == nullptr || ++gp->tsan_uses >= 256) {
    if (gp->tsan_fiber != nullptr) __tsan_destroy_fiber(gp->tsan_fiber);
    gp->tsan_fiber = __tsan_create_fiber(0);
    gp->tsan_uses = 0;
  }
#endif
  (void)gp;
}

// Arrived on goroutine gp (resumed, or new when `fresh`).
inline void san_enter_g(G* gp, bool fresh) {
#ifdef GORO_HAVE_ASAN
  __sanitizer_finish_switch_fiber(fresh ? nullptr : gp->asan_fake_stack,
                                  nullptr, nullptr);
#endif
  (void)gp;
  (void)fresh;
}

// Layout shared by libstdc++ and libc++abi (__cxa_eh_globals).
struct cxa_eh_globals {
  void* caught;
  unsigned int uncaught;
};

// Moves the thread's exception globals into gp (the goroutine leaves).
inline void eh_save(M* mp, G* gp) {
  auto* g = static_cast<cxa_eh_globals*>(mp->eh_globals);
  gp->eh.caught = g->caught;
  gp->eh.uncaught = g->uncaught;
  if (g->caught || g->uncaught) {
    g->caught = nullptr;
    g->uncaught = 0;
  }
}

// Installs gp's exception globals on this thread (the goroutine resumes).
inline void eh_restore(M* mp, G* gp) {
  if (gp->eh.caught || gp->eh.uncaught) {
    auto* g = static_cast<cxa_eh_globals*>(mp->eh_globals);
    g->caught = gp->eh.caught;
    g->uncaught = gp->eh.uncaught;
  }
}

}  // namespace goro::rt
