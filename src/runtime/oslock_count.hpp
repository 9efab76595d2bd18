// oslock_count.hpp: the counting helpers shared by the lock wrappers of
// oslock.cpp (pthread locks) and oslock_hidden.cpp (static-initialisation
// guards, once, stdio and C11 locks). Internal to those two files.
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/tls.hpp"

namespace goro::rt::oslock_detail {

[[noreturn]] inline void die(const char* msg) {
  // No stdio: this may run inside a lock wrapper.
  (void)!write(2, msg, __builtin_strlen(msg));
  _exit(2);
}

// The next definition of `name` (libc's, libstdc++'s or a sanitizer's).
template <class F>
void resolve_one(F& slot, const char* name) {
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) {
    die("fatal error: goro: cannot find the real lock functions (dlsym "
        "RTLD_NEXT)\n");
  }
  slot = reinterpret_cast<F>(p);
}

// The running goroutine, or null (a plain thread, or g0). No goroutine
// switch happens inside a wrapper before the value is used, so a direct
// TLS read is fine here.
inline G* cur() {
  M* mp = goro_tls_m;
  return mp != nullptr ? mp->curg.load(std::memory_order_relaxed) : nullptr;
}

inline void inc(G* gp) {
  gp->oslocks.store(gp->oslocks.load(std::memory_order_relaxed) + 1,
                    std::memory_order_relaxed);
  // The count must be in memory before the lock is taken (the handler
  // reads it on this thread).
  std::atomic_signal_fence(std::memory_order_seq_cst);
}

// Undoes inc after an acquire that failed.
inline void undo_inc(G* gp) {
  std::atomic_signal_fence(std::memory_order_seq_cst);
  gp->oslocks.store(gp->oslocks.load(std::memory_order_relaxed) - 1,
                    std::memory_order_relaxed);
}

// Before a release: drops the count. Safe before the lock is actually
// released: from here until the wrapper returns to its caller the PC is in
// goro's or libc's code, where the handler never preempts. True when the
// release must be followed by the deferred preemption (the count reached
// zero with one asked for).
__attribute__((always_inline)) inline bool dec(G* gp) {
  std::int32_t n = gp->oslocks.load(std::memory_order_relaxed);
  if (n <= 0) return false;
  gp->oslocks.store(n - 1, std::memory_order_relaxed);
  return n == 1 && gp->preempt.load(std::memory_order_relaxed);
}

}  // namespace goro::rt::oslock_detail
