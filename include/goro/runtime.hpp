// goro — Go's runtime scheduler as a C++20 library.
//
// runtime.hpp: starting the runtime, spawning goroutines, yielding and
// inspecting the scheduler (Go's runtime package: go, Gosched, Goexit,
// GOMAXPROCS, NumCPU, NumGoroutine).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <new>
#include <stdexcept>
#include <tuple>
#include <type_traits>
#include <utility>

namespace goro {

// How a goroutine stack's lowest page is protected against overflow.
//   automatic: madvise(MADV_GUARD_INSTALL) when the kernel has it (6.13+),
//              else mprotect within a budget of memory mappings, else canary.
//   madvise / mprotect / canary: force one mechanism (mainly for tests).
// The environment variable GORO_STACK_GUARD=auto|madvise|mprotect|canary
// overrides options::guard; any other value (empty included) is a fatal
// error (exit 2).
enum class stack_guard { automatic, madvise, mprotect, canary };

// Runtime-wide settings, applied when the runtime starts: by the first call
// of run(), or by anything that needs the runtime before it (go(), a
// channel, a timer, gomaxprocs()), which starts it with the defaults.
//
// run() throws std::invalid_argument for a value no runtime can start with
// (a stack_size out of range, a guard that is not a stack_guard). Given to
// a runtime that is already running, the options are checked against it:
// gomaxprocs applies (as gomaxprocs(n)); a stack_size or guard other than
// the running one cannot and throws std::invalid_argument naming the
// option; 0, stack_guard::automatic and the running values are fine.
//
// Example (snippet: main):
//   goro::options opt;
//   opt.gomaxprocs = 4;
//   opt.stack_size = 1 << 20;  // 1 MiB stacks for deep recursion
//   return goro::run(opt, [] { /* ... */ });
struct options {
  // Number of Ps. 0 (or less): the GOMAXPROCS environment variable, else
  // num_cpu(). As in Go, a GOMAXPROCS that is not a positive decimal
  // number is ignored. Capped at 1024.
  int gomaxprocs = 0;
  // Virtual reservation per goroutine stack, guard page included, rounded
  // up to whole 4 KiB pages; memory is committed page by page. 0: the
  // GORO_STACK_SIZE environment variable (decimal bytes with an optional
  // k/K, m/M or g/G suffix for KiB, MiB, GiB, e.g. 256k or 1g; a malformed
  // value is a fatal error, exit 2), else 64 KiB (256 KiB when built with
  // ASan or TSan). Otherwise 16 KiB to
  // 1 GiB: smaller or larger values throw std::invalid_argument (and are a
  // fatal error in GORO_STACK_SIZE).
  std::size_t stack_size = 0;
  stack_guard guard = stack_guard::automatic;
  // The time slice (Go's forcePreemptNS): a goroutine that has run this
  // long without blocking is preempted (cooperatively at its next runtime
  // entry; by signal in call-free code, see goro::debug::set_async_preempt).
  // 0: the GORO_TIMESLICE environment variable (a number and a unit, ns,
  // us, ms or s, e.g. 1ms; malformed or out of range is a fatal error,
  // exit 2), else 10 ms. Otherwise 100us to 10s: other values throw
  // std::invalid_argument. Can be changed while the runtime runs
  // (goro::debug::set_time_slice).
  std::chrono::nanoseconds time_slice{0};
};

// Per-goroutine settings for go(go_options{...}, fn, args...).
struct go_options {
  std::size_t stack_size = 0;  // 0: the runtime default
};

namespace detail {
// The callable of a new goroutine lives in its G (48 bytes inline; larger
// or over-aligned callables on the heap); the goroutine gets a stack when
// it first runs. newproc_prepare reserves a G and storage for `size` bytes
// aligned to `align`; newproc_commit makes it runnable (into the current
// P's runnext, as Go's newproc does); newproc_abort returns the G if
// constructing the callable threw.
struct spawn_slot {
  void* g;
  void* storage;
};
spawn_slot newproc_prepare(std::size_t stack_size, std::size_t size,
                           std::size_t align);
// startpc: the program's function (start_pc below), for goroutine dumps.
void newproc_commit(spawn_slot slot, void (*entry)(void*),
                    const void* startpc = nullptr);
void newproc_abort(spawn_slot slot) noexcept;

// Starts the runtime if it is not running yet (idempotent, thread-safe).
void ensure_started(const options* opt);
// Runs main_fn as a goroutine, blocks the calling thread until it returns,
// and gives back its result.
int run_main(const options* opt, std::function<int()> main_fn,
             const void* startpc);

// The code address of the function a goroutine runs, which goroutine
// dumps name (Go's g.startpc): a function pointer's target, or a class's
// one non-template, non-virtual operator() (a lambda's); else null. Taking
// the operator's address makes the compiler emit an out-of-line copy too
// (the goroutine's own calls still inline it).
template <class F>
const void* start_pc(const F& f) noexcept {
  if constexpr (std::is_pointer_v<F> &&
                std::is_function_v<std::remove_pointer_t<F>>) {
    return reinterpret_cast<const void*>(f);
  } else if constexpr (requires { &F::operator(); }) {
    (void)f;  // the type names it
    auto m = &F::operator();
    // The Itanium C++ ABI's member function pointer: {ptr, adj}, ptr the
    // code address of a non-virtual function (odd: a vtable offset).
    std::uintptr_t p;
    static_assert(sizeof m >= sizeof p);
    std::memcpy(&p, &m, sizeof p);
    return (p & 1) == 0 ? reinterpret_cast<const void*>(p) : nullptr;
  } else {
    return nullptr;
  }
}

template <class T>
struct is_std_function : std::false_type {};
template <class R, class... A>
struct is_std_function<std::function<R(A...)>> : std::true_type {};

// A callable that can be empty: a null function or member pointer, or an
// empty std::function. goro::go refuses it in the caller, as Go's `go f()`
// with a nil f panics there ("go of nil func value"), instead of starting
// a goroutine that dies at once.
template <class F>
bool is_nil_callable(const F& f) noexcept {
  // remove_cvref, not decay: a function passed by name is a reference that
  // can never be null (and comparing it would not compile under -Werror).
  using D = std::remove_cvref_t<F>;
  if constexpr (std::is_pointer_v<D> || std::is_member_pointer_v<D>)
    return f == nullptr;
  else if constexpr (is_std_function<D>::value)
    return !static_cast<bool>(f);
  else
    return false;
}

template <class Fn>
struct closure {
  Fn fn;
  static void entry(void* self) {
    auto* c = static_cast<closure*>(self);
    // The callable is destroyed when the goroutine finishes, also when it
    // ends by goexit or an exception (the destructor runs during unwinding).
    struct guard {
      closure* c;
      ~guard() { c->~closure(); }
    } g{c};
    std::invoke(c->fn);
  }
};

template <class F, class... Args>
auto bind_call(F&& f, Args&&... args) {
  // std::tuple of decayed copies, not make_tuple: a std::reference_wrapper
  // stays one, so std::ref(x) binds to a T& parameter as with std::thread.
  return [fn = std::forward<F>(f), tup = std::tuple<std::decay_t<Args>...>(
                                       std::forward<Args>(args)...)]() mutable {
    std::apply([&](auto&... a) { std::invoke(fn, std::move(a)...); }, tup);
  };
}
}  // namespace detail

// Starts `fn(args...)` as a new goroutine. The arguments are copied or moved
// into the goroutine (like std::thread). Callable from goroutines and from
// plain threads; a plain thread's first call starts the runtime.
// (Always inlined, also in -O0 builds: the spawn's return address, which
// goroutine dumps print as "created by", is then in the caller.)
template <class F, class... Args>
[[gnu::always_inline]] inline void go(const go_options& opt, F&& fn,
                                      Args&&... args) {
  if (detail::is_nil_callable(fn))
    throw std::invalid_argument("go of nil func value");
  using Fn = std::decay_t<decltype(detail::bind_call(
      std::forward<F>(fn), std::forward<Args>(args)...))>;
  using C = detail::closure<Fn>;
  detail::spawn_slot slot =
      detail::newproc_prepare(opt.stack_size, sizeof(C), alignof(C));
  try {
    ::new (slot.storage)
        C{detail::bind_call(std::forward<F>(fn), std::forward<Args>(args)...)};
  } catch (...) {
    detail::newproc_abort(slot);
    throw;
  }
  detail::newproc_commit(slot, &C::entry,
                         detail::start_pc<std::decay_t<F>>(fn));
}

template <class F, class... Args>
  requires(!std::is_same_v<std::decay_t<F>, go_options>)
[[gnu::always_inline]] inline void go(F&& fn, Args&&... args) {
  go(go_options{}, std::forward<F>(fn), std::forward<Args>(args)...);
}

// Runs main_fn as a goroutine (goroutine 1 on a fresh process) and returns
// its int result (0 for void). The calling thread blocks until main_fn
// returns. Goroutines still running when it returns keep running.
template <class F>
int run(const options& opt, F&& main_fn) {
  std::function<int()> wrapped = [&main_fn]() -> int {
    if constexpr (std::is_void_v<std::invoke_result_t<F&>>) {
      std::invoke(main_fn);
      return 0;
    } else {
      return static_cast<int>(std::invoke(main_fn));
    }
  };
  return detail::run_main(&opt, std::move(wrapped),
                          detail::start_pc<std::decay_t<F>>(main_fn));
}

template <class F>
int run(F&& main_fn) {
  return run(options{}, std::forward<F>(main_fn));
}

// Yields the processor: the goroutine goes to the global run queue and stays
// runnable (Go's runtime.Gosched). On a plain thread it yields the thread.
void gosched();

// Ends the calling goroutine, unwinding its stack so destructors run. A
// catch(...) on the way must rethrow (as with thread cancellation); one that
// swallows the unwinding is a fatal error.
[[noreturn]] void goexit();

// n > 0 sets the number of Ps (capped at the runtime's maximum) and returns
// the previous setting; n < 1 (0, the default, or negative) only queries, as
// Go's runtime.GOMAXPROCS.
int gomaxprocs(int n = 0);
// CPUs this process may use: affinity mask, then cgroup CPU quota (rounded up).
int num_cpu();
// Goroutines that exist now (running, runnable or blocked).
std::int64_t num_goroutine();
// The calling goroutine's id; 0 on a plain thread.
std::uint64_t goroutine_id();
// A cooperative preemption point: yields if the scheduler asked this
// goroutine to (its time slice is over). Cheap when there is no request.
void preempt_point();

namespace detail {
void preempt_disable() noexcept;
void preempt_enable() noexcept;
}  // namespace detail

// Disables asynchronous (signal) preemption of the calling goroutine for
// its lifetime; nestable. Use it around code in the executable that must
// not be interrupted and resumed later: a critical section of a std::mutex
// or any OS-level lock another goroutine may take, code that relies on a
// thread_local address staying put. Blocking goro calls inside the scope
// still switch goroutines as usual. When the outermost guard ends and the
// goroutine's time slice ran out meanwhile, it yields there (a cooperative
// preemption point). No-op on a plain thread.
class preempt_guard {
 public:
  preempt_guard() noexcept { detail::preempt_disable(); }
  ~preempt_guard() { detail::preempt_enable(); }
  preempt_guard(const preempt_guard&) = delete;
  preempt_guard& operator=(const preempt_guard&) = delete;
};

// Wires the calling goroutine to its current OS thread: until as many
// unlock_os_thread calls, it runs only on this thread and the thread runs
// nothing else. A goroutine that exits while locked ends its thread too.
// No-ops on a plain thread.
void lock_os_thread();
void unlock_os_thread();

// Marks a region that may block its thread in the kernel (Go's syscall
// entry/exit). The goroutine's P stays reserved for it; if the call takes
// long (sysmon looks every 20 us-10 ms) and there is other work, the P is
// handed to another thread so other goroutines keep running. long_call:
// hand the P off at once (for calls known to block). errno as the call left
// it is what the goroutine reads after the region, even if it continues on
// another thread. Parking inside a region (a channel operation, sleep) is
// allowed but defeats its purpose. No-ops on a plain thread.
class blocking_scope {
 public:
  explicit blocking_scope(bool long_call = false);
  ~blocking_scope();
  blocking_scope(const blocking_scope&) = delete;
  blocking_scope& operator=(const blocking_scope&) = delete;

 private:
  bool active_;
};

// Runs fn() as a blocking call and returns its result (snippet: goroutine):
//   char buf[64];
//   ssize_t r = goro::blocking([&] { return ::read(0, buf, sizeof buf); });
//   if (r < 0) std::perror("read");
template <class F>
decltype(auto) blocking(F&& fn) {
  blocking_scope scope;
  return std::forward<F>(fn)();
}
// The same for calls known to block for long: the P is handed off at once.
template <class F>
decltype(auto) blocking_long(F&& fn) {
  blocking_scope scope(true);
  return std::forward<F>(fn)();
}

// Go's debug.SetMaxThreads: the limit on OS threads (default 10000);
// exceeding it is the fatal error "thread exhaustion". Returns the old one.
int set_max_threads(int n);

}  // namespace goro
