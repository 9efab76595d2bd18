// pool.cpp: the type-erased core of goro::pool<T> (Go's sync.Pool).
//
// Layout. Every pool has, per P, a `local`: a stack of up to
// pool_local_capacity object pointers that only the goroutine running on
// that P reads or writes, so get() and put() on it are plain loads and
// stores (no lock, no atomic read-modify-write). The top of the stack is
// what Go calls the private slot: put() places an object there and get()
// takes it first, so a goroutine that puts and then gets receives its own
// object back, still warm in its cache. Go keeps a separate private slot
// because the rest of its per-P storage (a lock-free poolChain) is read by
// other Ps stealing from it; here no other P ever touches a local, so the
// private slot and the rest are one array.
//
// Objects move between Ps through one shared list per pool (a vector
// behind a runtime lock, at most max_shared entries): a full local spills
// its older half there in one locked step, an empty local refills up to
// half its capacity from there in one locked step. Batching keeps the lock
// off the fast path for any steady get/put mix; a strict producer P and
// consumer P take the lock once per half-capacity objects. This replaces
// Go's stealing from other Ps' poolChains: simpler, and the cost (a lock
// per batch instead of a CAS per object) only shows on the imbalanced path.
//
// Staying on the P. Between reading the M's P and the last access to its
// local, the goroutine must neither switch nor be preempted: another
// goroutine scheduled on the same P would use the same local, and after a
// migration this one would write a local that another thread now owns.
// Go pins with procPin (m.locks++). Here the pinning costs nothing: this
// file is goro's code, which asynchronous preemption never interrupts (the
// static library's code is in section goro_text, cmake/goro_text.cmake;
// libgoro.so is outside the executable, whose code alone is preemptible),
// and nothing below reaches a cooperative preemption point or a goroutine
// switch (the runtime lock spins, yields the thread or sleeps on a futex,
// but never parks the goroutine). A goroutine keeps its P until it blocks
// or yields, so mp->p is the same P for the whole call. No user code runs
// while a local is in use: objects to destroy are collected first and
// destroyed (user destructors, which may block or yield) at the end.
//
// No P. On a plain thread, and in a goroutine inside a blocking region
// (entersyscall cleared M.p: sysmon may hand the P to another thread), get
// and put use the shared list directly.
//
// Per-P storage for a changing GOMAXPROCS. A directory (array of local
// pointers indexed by P id) sized to GOMAXPROCS when first used. A P whose
// id is beyond it (GOMAXPROCS grew) builds a larger directory under the
// lock, copies the pointers, publishes it with a release store, and keeps
// the old one on a retired list until the pool dies (a P may still be
// reading it). Locals never move, and a local is created only under the
// lock, so the copy cannot lose one. When GOMAXPROCS shrinks, the locals of
// the Ps that went away keep their objects until the destructor (Ps are
// never freed; the same ids come back if it grows).
//
// clear() without touching other Ps' locals (Go clears pools at GC, with
// the world stopped; goro has no such moment). clear() bumps the pool's
// epoch and empties the shared list in one critical section, then empties
// the caller's own local. Every get/put compares its local's epoch with
// the pool's (one load, no RMW) and, when they differ, first empties the
// local: objects cached before a clear are destroyed by their own P at its
// next use, or by the destructor, and never handed out by a get that
// started after the clear returned.
#include <algorithm>
#include <goro/pool.hpp>
#include <new>
#include <vector>

#include "runtime/lock.hpp"
#include "runtime/p.hpp"
#include "runtime/sched.hpp"
#include "runtime/tls.hpp"

namespace goro::detail {

namespace {
constexpr std::uint32_t cap = pool_local_capacity;
constexpr std::uint32_t batch = cap / 2;
}  // namespace

struct alignas(64) pool_base::local {
  // Owner-written; atomic only so that size_approx may read it from any
  // thread (relaxed load + store, no read-modify-write).
  std::atomic<std::uint32_t> n{0};
  // The pool's epoch_ when this stack was last known clean (owner-only,
  // or under the lock while the owner is inside refill/spill).
  std::uint64_t epoch = 0;
  void* objs[cap] = {};
};

struct pool_base::directory {
  std::int32_t n = 0;
  std::atomic<local*>* slots = nullptr;
  directory* retired = nullptr;  // the directory this one replaced
};

struct pool_base::shared {
  rt::mutex mu{rt::lock_rank::pool};
  std::vector<void*> objs;  // guarded by mu
};

pool_base::pool_base(destroy_fn destroy, std::size_t max_shared)
    : destroy_(destroy), max_shared_(max_shared), shared_(new shared) {}

pool_base::~pool_base() {
  free_all();
  directory* d = dir_.load(std::memory_order_acquire);
  if (d != nullptr) {
    for (std::int32_t i = 0; i < d->n; i++)
      delete d->slots[i].load(std::memory_order_relaxed);
  }
  while (d != nullptr) {
    directory* older = d->retired;
    delete[] d->slots;
    delete d;
    d = older;
  }
  delete shared_;
}

// The calling P's local; pid is the P's id. Creates the local (and grows
// the directory) on the first use of this pool by this P.
pool_base::local* pool_base::pin_slow(int pid) noexcept {
  rt::lock_guard g(shared_->mu);
  try {
    directory* d = dir_.load(std::memory_order_relaxed);
    if (d == nullptr || pid >= d->n) {
      std::int32_t n = std::max<std::int32_t>(pid + 1, rt::gomaxprocs_now());
      if (d != nullptr) n = std::max(n, d->n * 2);
      auto* nd = new directory;
      nd->n = n;
      nd->slots = new std::atomic<local*>[std::size_t(n)]();
      for (std::int32_t i = 0; d != nullptr && i < d->n; i++)
        nd->slots[i].store(d->slots[i].load(std::memory_order_relaxed),
                           std::memory_order_relaxed);
      nd->retired = d;
      dir_.store(nd, std::memory_order_release);
      d = nd;
    }
    local* l = d->slots[pid].load(std::memory_order_relaxed);
    if (l == nullptr) {
      l = new local;
      l->epoch = epoch_.load(std::memory_order_relaxed);
      d->slots[pid].store(l, std::memory_order_release);
    }
    return l;
  } catch (const std::bad_alloc&) {
    return nullptr;  // the caller uses the shared list
  }
}

namespace {
// The P this goroutine runs on, or nullptr (plain thread, blocking region).
inline rt::P* current_p() {
  rt::M* mp = rt::getm();
  return mp != nullptr ? mp->p : nullptr;
}
}  // namespace

void* pool_base::get() noexcept {
  rt::P* pp = current_p();
  if (pp == nullptr) return get_shared();
  directory* d = dir_.load(std::memory_order_acquire);
  local* l = nullptr;
  if (d != nullptr && pp->id < d->n)
    l = d->slots[pp->id].load(std::memory_order_acquire);
  if (l == nullptr && (l = pin_slow(pp->id)) == nullptr) return get_shared();
  if (l->epoch != epoch_.load(std::memory_order_acquire)) return get_stale(l);
  std::uint32_t n = l->n.load(std::memory_order_relaxed);
  if (n == 0) return refill(l);
  l->n.store(n - 1, std::memory_order_relaxed);
  return l->objs[n - 1];
}

void pool_base::put(void* p) noexcept {
  rt::P* pp = current_p();
  if (pp == nullptr) return put_shared(p);
  directory* d = dir_.load(std::memory_order_acquire);
  local* l = nullptr;
  if (d != nullptr && pp->id < d->n)
    l = d->slots[pp->id].load(std::memory_order_acquire);
  if (l == nullptr && (l = pin_slow(pp->id)) == nullptr) return put_shared(p);
  if (l->epoch != epoch_.load(std::memory_order_acquire))
    return put_stale(l, p);
  std::uint32_t n = l->n.load(std::memory_order_relaxed);
  if (n == cap) return spill(l, p);
  l->objs[n] = p;
  l->n.store(n + 1, std::memory_order_relaxed);
}

// l is empty: take up to a batch from the shared list; one is returned,
// the rest go to l (the most recently shared on top).
void* pool_base::refill(local* l) noexcept {
  rt::lock_guard g(shared_->mu);
  // l is empty, so it is clean whatever clear() did since the caller
  // looked: what it receives now was shared after that clear.
  l->epoch = epoch_.load(std::memory_order_relaxed);
  std::vector<void*>& s = shared_->objs;
  if (s.empty()) return nullptr;
  std::size_t k = std::min<std::size_t>(batch, s.size());
  std::size_t from = s.size() - k;
  // s[from .. end): the last one is returned, the others fill l in order.
  for (std::size_t i = 0; i + 1 < k; i++) l->objs[i] = s[from + i];
  void* p = s.back();
  s.resize(from);
  l->n.store(std::uint32_t(k - 1), std::memory_order_relaxed);
  return p;
}

// l is full: move its older half to the shared list, then push p. What the
// shared list has no room for is destroyed, after l is no longer used.
void pool_base::spill(local* l, void* p) noexcept {
  void* drop[batch];
  std::uint32_t ndrop = 0;
  {
    rt::lock_guard g(shared_->mu);
    std::vector<void*>& s = shared_->objs;
    // A clear() since the caller looked: l's objects predate it, so they
    // are dropped rather than shared (the rest of l goes at the next use).
    bool stale = l->epoch != epoch_.load(std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < batch; i++) {
      bool kept = false;
      if (!stale && s.size() < max_shared_) {
        try {
          s.push_back(l->objs[i]);
          kept = true;
        } catch (const std::bad_alloc&) {
        }
      }
      if (!kept) drop[ndrop++] = l->objs[i];
    }
  }
  for (std::uint32_t i = batch; i < cap; i++) l->objs[i - batch] = l->objs[i];
  l->objs[cap - batch] = p;
  l->n.store(cap - batch + 1, std::memory_order_relaxed);
  // From here on this goroutine may switch: l is not touched again.
  for (std::uint32_t i = 0; i < ndrop; i++) destroy_(drop[i]);
}

void* pool_base::get_shared() noexcept {
  rt::lock_guard g(shared_->mu);
  std::vector<void*>& s = shared_->objs;
  if (s.empty()) return nullptr;
  void* p = s.back();
  s.pop_back();
  return p;
}

void pool_base::put_shared(void* p) noexcept {
  {
    rt::lock_guard g(shared_->mu);
    std::vector<void*>& s = shared_->objs;
    if (s.size() < max_shared_) {
      try {
        s.push_back(p);
        return;
      } catch (const std::bad_alloc&) {
      }
    }
  }
  destroy_(p);
}

// l holds objects cached before a clear(): empty it (marking it clean),
// serve the request, then destroy them once l is no longer used.
void* pool_base::get_stale(local* l) noexcept {
  void* old[cap];
  std::uint32_t n = l->n.load(std::memory_order_relaxed);
  std::copy(l->objs, l->objs + n, old);
  l->n.store(0, std::memory_order_relaxed);
  void* p = refill(l);  // marks l clean under the lock
  for (std::uint32_t i = 0; i < n; i++) destroy_(old[i]);
  return p;
}

void pool_base::put_stale(local* l, void* p) noexcept {
  void* old[cap];
  std::uint32_t n = l->n.load(std::memory_order_relaxed);
  std::copy(l->objs, l->objs + n, old);
  l->epoch = epoch_.load(std::memory_order_acquire);
  l->objs[0] = p;
  l->n.store(1, std::memory_order_relaxed);
  for (std::uint32_t i = 0; i < n; i++) destroy_(old[i]);
}

// A new epoch makes every P's stack stale; the shared list is emptied in
// the same critical section, so whatever is shared afterwards was put after
// the clear. The caller's own P (if any) is emptied at once; the others
// empty themselves at their next get/put (get_stale, put_stale).
void pool_base::clear() noexcept {
  std::vector<void*> all;
  {
    rt::lock_guard g(shared_->mu);
    epoch_.store(epoch_.load(std::memory_order_relaxed) + 1,
                 std::memory_order_release);
    all.swap(shared_->objs);
  }
  for (void* p : all) destroy_(p);
  if (rt::P* pp = current_p()) {
    directory* d = dir_.load(std::memory_order_acquire);
    local* l = nullptr;
    if (d != nullptr && pp->id < d->n)
      l = d->slots[pp->id].load(std::memory_order_acquire);
    if (l != nullptr && l->epoch != epoch_.load(std::memory_order_acquire)) {
      void* old[cap];
      std::uint32_t n = l->n.load(std::memory_order_relaxed);
      std::copy(l->objs, l->objs + n, old);
      l->n.store(0, std::memory_order_relaxed);
      l->epoch = epoch_.load(std::memory_order_acquire);
      // l is done with: from here this goroutine may switch.
      for (std::uint32_t i = 0; i < n; i++) destroy_(old[i]);
    }
  }
}

// The destructor: no concurrent use, so every P's stack can be read.
void pool_base::free_all() noexcept {
  std::vector<void*> all;
  {
    rt::lock_guard g(shared_->mu);
    all.swap(shared_->objs);
  }
  for (void* p : all) destroy_(p);
  directory* d = dir_.load(std::memory_order_acquire);
  for (std::int32_t i = 0; d != nullptr && i < d->n; i++) {
    local* l = d->slots[i].load(std::memory_order_acquire);
    if (l == nullptr) continue;
    void* objs[cap];
    std::uint32_t n = l->n.load(std::memory_order_relaxed);
    std::copy(l->objs, l->objs + n, objs);
    l->n.store(0, std::memory_order_relaxed);
    for (std::uint32_t k = 0; k < n; k++) destroy_(objs[k]);
  }
}

std::size_t pool_base::size_approx() const noexcept {
  std::size_t total = 0;
  {
    rt::lock_guard g(shared_->mu);
    total = shared_->objs.size();
  }
  directory* d = dir_.load(std::memory_order_acquire);
  for (std::int32_t i = 0; d != nullptr && i < d->n; i++) {
    if (local* l = d->slots[i].load(std::memory_order_acquire))
      total += l->n.load(std::memory_order_relaxed);
  }
  return total;
}

}  // namespace goro::detail
