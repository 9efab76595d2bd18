// errgroup.hpp: golang.org/x/sync/errgroup. A group of goroutines working
// on parts of one task: go(fn) starts each, wait() waits for all of them and
// rethrows the first exception any of them threw (Go: the first non-nil
// error). with_context(parent) also gives the group a context that is
// cancelled as soon as one goroutine fails, so the others can stop early,
// and in any case when wait() returns.
//
// Example (snippet: goroutine):
//   auto g = goro::errgroup::with_context(goro::background());
//   goro::context ctx = g.ctx();
//   auto results = goro::make_chan<int>(3);
//   for (int i = 1; i <= 3; i++) {
//     g.go([ctx, results, i] {
//       if (i == 2) throw std::runtime_error("part 2 failed");
//       // A real part would watch ctx.done() while it works.
//       if (!ctx.err()) results.send(i);
//     });
//   }
//   try {
//     g.wait();
//   } catch (const std::runtime_error& e) {
//     std::printf("%s; ctx: %s\n", e.what(), g.ctx().err().message().c_str());
//   }
//
// A function may also return a std::error_code (Go's `func() error`): a
// non-empty one fails the group like an exception, and wait() throws it as
// std::system_error. goro::goexit in a goroutine ends it without failing the
// group, as Go's runtime.Goexit.
//
// set_limit(n) caps the goroutines running at once: go() then blocks while n
// are running, and try_go() returns false instead of blocking.
//
// Lifetime: the goroutines refer to the group, so the destructor waits for
// them (without rethrowing); wait() first to see the error. A group is used
// again after wait() returns, like a WaitGroup; the first error stays.
#pragma once

#include <concepts>
#include <cstdint>
#include <exception>
#include <functional>
#include <goro/chan.hpp>
#include <goro/context.hpp>
#include <goro/runtime.hpp>
#include <goro/sync.hpp>
#include <system_error>
#include <type_traits>
#include <utility>

namespace goro {

class errgroup {
 public:
  // A group without a context.
  errgroup() = default;
  // A group whose ctx() is a child of parent, cancelled by the first
  // failure and when wait() returns.
  explicit errgroup(const context& parent);
  // Go's errgroup.WithContext: auto g = goro::errgroup::with_context(p);
  static errgroup with_context(const context& parent) {
    return errgroup(parent);
  }

  errgroup(const errgroup&) = delete;
  errgroup& operator=(const errgroup&) = delete;
  // Waits for the group's goroutines (an error is not rethrown here).
  ~errgroup();

  // The group's context: background() for a group made without one.
  const context& ctx() const noexcept { return ctx_; }

  // Runs fn() in a new goroutine, after waiting for a free slot if a limit
  // is set. fn returns void or std::error_code.
  template <class F>
    requires std::invocable < std::decay_t<F>
  & > void go(F&& fn) {
    acquire_slot();
    spawn(std::forward<F>(fn));
  }

  // As go(), but returns false (and runs nothing) if the limit is reached.
  template <class F>
    requires std::invocable < std::decay_t<F>
  & > bool try_go(F&& fn) {
    if (!try_acquire_slot()) return false;
    spawn(std::forward<F>(fn));
    return true;
  }

  // At most n goroutines of this group run at once; n < 0: no limit (the
  // default). n == 0 admits none (go blocks, try_go fails), as in Go.
  // Throws std::logic_error while goroutines of the group are running.
  void set_limit(int n);

  // Blocks until every goroutine started by go() has finished, cancels the
  // group's context, and rethrows the first failure, if any.
  void wait();

 private:
  using call_fn = void (*)(void*);

  template <class F>
  void spawn(F&& fn) {
    using Fn = std::decay_t<F>;
    wg_.add(1);
    try {
      goro::go([this, f = Fn(std::forward<F>(fn))]() mutable {
        run(&f, [](void* p) {
          Fn& fr = *static_cast<Fn*>(p);
          using R = std::invoke_result_t<Fn&>;
          if constexpr (std::is_same_v<R, std::error_code>) {
            if (std::error_code e = std::invoke(fr)) throw std::system_error(e);
          } else {
            std::invoke(fr);
          }
        });
      });
    } catch (...) {
      wg_.done();
      release_slot();
      throw;
    }
  }

  // Runs call(fn) for one goroutine: records its failure, then done().
  void run(void* fn, call_fn call);
  void fail(std::exception_ptr e);
  void acquire_slot();
  bool try_acquire_slot();
  void release_slot() noexcept;

  wait_group wg_;
  chan<void> sem_;  // a token per running goroutine; nil: no limit
  once err_once_;
  std::exception_ptr err_;  // written once, under err_once_
  context ctx_;
  cancel_func cancel_;
};

}  // namespace goro
