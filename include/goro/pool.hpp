// pool.hpp: goro::pool<T>, Go's sync.Pool: a cache of idle objects that
// goroutines take and give back, kept per P so that the common get/put pair
// touches only the calling P's slots (no lock, no atomic read-modify-write).
//
//   goro::pool<std::string> bufs([] { return std::make_unique<std::string>();
//   }); std::unique_ptr<std::string> b = bufs.get();   // cached, or a new one
//   b->clear();                                    // state is whatever put
//   left bufs.put(std::move(b));                        // back into the cache
//
// Objects are handed out as std::unique_ptr<T> (deleted with plain delete):
// an object obtained from get() is the caller's until it is put back, and
// one that is never put back is freed by its unique_ptr as usual.
//
// Where the objects are (src/sync/pool.cpp has the details):
//   - per P, a small stack of local_capacity objects whose top is Go's
//     private slot, touched only by the goroutine running on that P;
//   - one shared list per pool behind a short runtime lock, holding at most
//     max_shared objects: a P's stack spills half of itself there when full,
//     and refills from there when empty (how objects move between Ps).
//     Plain threads (not goroutines) and goroutines inside a blocking region
//     (goro::blocking) have no P and use the shared list only.
//
// When cached objects are destroyed (there is no garbage collector to drop
// them as Go does at each GC through its victim cache):
//   - put() destroys the object instead of caching it when its P's slots and
//     the shared list are all full (so a pool holds at most
//     max_shared + local_capacity per P objects);
//   - clear() destroys the objects in the shared list and on the calling
//     goroutine's P at once; every other P drops what it cached before the
//     clear the next time it uses the pool (so no get() that starts after
//     clear() returns hands out an object cached before it). It may run
//     concurrently with get() and put();
//   - the destructor destroys every cached object.
// Each object is destroyed exactly once, by whoever holds it last.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>
#include <utility>

namespace goro {

namespace detail {

// Objects each P keeps (pool.cpp: the top one is Go's private slot).
inline constexpr std::size_t pool_local_capacity = 16;

// The type-erased core, in libgoro (src/sync/pool.cpp): it stores void*
// and never calls user code while it uses a P's slots.
class pool_base {
 public:
  using destroy_fn = void (*)(void*) noexcept;

  pool_base(destroy_fn destroy, std::size_t max_shared);
  ~pool_base();
  pool_base(const pool_base&) = delete;
  pool_base& operator=(const pool_base&) = delete;

  // A cached object, or nullptr.
  void* get() noexcept;
  // Caches p (not null), or destroys it when the pool is full.
  void put(void* p) noexcept;
  // Destroys the shared list's objects and the calling P's; the other Ps
  // drop theirs at their next get/put (epoch_). Safe with concurrent use.
  void clear() noexcept;
  // Objects cached now (a snapshot; exact only without concurrent use).
  std::size_t size_approx() const noexcept;

  struct local;
  struct directory;

 private:
  struct shared;
  local* pin_slow(int pid) noexcept;
  void* refill(local* l) noexcept;
  void spill(local* l, void* p) noexcept;
  void* get_stale(local* l) noexcept;
  void put_stale(local* l, void* p) noexcept;
  void free_all() noexcept;
  void* get_shared() noexcept;
  void put_shared(void* p) noexcept;

  destroy_fn destroy_;
  std::size_t max_shared_;
  // Per-P slots, indexed by P id; replaced (never shrunk) when a P with a
  // larger id shows up.
  std::atomic<directory*> dir_{nullptr};
  // Bumped by clear() (under the lock); a local whose epoch differs holds
  // objects cached before a clear.
  std::atomic<std::uint64_t> epoch_{0};
  shared* shared_;  // the shared list and its lock
};

}  // namespace detail

// Go's sync.Pool for objects of type T.
template <class T>
class pool {
 public:
  // Objects a P keeps (the last one put is its private slot) before it
  // spills half of them to the shared list.
  static constexpr std::size_t local_capacity = detail::pool_local_capacity;
  static constexpr std::size_t default_max_shared = 1024;

  using pointer = std::unique_ptr<T>;
  using factory = std::function<pointer()>;

  // Without a factory (Go's New left nil): get() returns nullptr when
  // nothing is cached.
  pool() : pool(factory{}) {}
  // new_fn makes an object when nothing is cached (Go's New). It may
  // return nullptr; its exceptions propagate out of get().
  explicit pool(factory new_fn, std::size_t max_shared = default_max_shared)
      : base_(&destroy, max_shared), new_(std::move(new_fn)) {}
  // Destroys every cached object. No get or put may run concurrently, as
  // with any object's destructor; objects still out are unaffected.
  ~pool() = default;
  pool(const pool&) = delete;
  pool& operator=(const pool&) = delete;

  // A cached object (the one this goroutine's P put last, if any), else
  // new_fn(), else nullptr. Its state is whatever it had when put back.
  pointer get() {
    if (void* p = base_.get()) return pointer(static_cast<T*>(p));
    if (new_) return new_();
    return nullptr;
  }
  // Caches obj for a later get(); nullptr is ignored. The pool may destroy
  // it instead (when full).
  void put(pointer obj) noexcept {
    if (obj) base_.put(obj.release());
  }
  // Drops every cached object: those in the shared list and on this
  // goroutine's P are destroyed now, those other Ps hold when their P next
  // uses the pool (or by the destructor). A get() that starts after clear()
  // returns never gets an object cached before it. May run concurrently
  // with get() and put().
  void clear() noexcept { base_.clear(); }
  // Objects cached now: exact when nothing runs concurrently.
  std::size_t size_approx() const noexcept { return base_.size_approx(); }

 private:
  static void destroy(void* p) noexcept { delete static_cast<T*>(p); }

  detail::pool_base base_;
  factory new_;
};

}  // namespace goro
