// defer.hpp: a scope guard for Go's defer. goro::defer d(fn) runs fn() when
// d goes out of scope: on a normal exit, on an exception (Go: a panic) and
// when the goroutine ends by goro::goexit, whose unwinding runs destructors.
// Several defers in one scope run in reverse order, as Go's. d.dismiss()
// cancels it (the commit/rollback idiom: undo unless the work succeeded).
//
// Example (snippet: goroutine):
//   goro::mutex mu;
//   {
//     mu.lock();
//     goro::defer unlock([&] { mu.unlock(); });  // Go: defer mu.Unlock()
//     work();
//   }
//
// Differences from Go: it runs at the end of the enclosing C++ scope, not
// of the function (in a loop body: every iteration); its arguments are
// whatever the callable captured (by reference: the values at exit; by
// copy: the values when the defer was made, like Go's evaluated arguments).
//
// Throwing: fn must not throw. The destructor is noexcept, so an exception
// leaving fn ends the program (std::terminate), on every path: during
// unwinding C++ could not propagate a second exception anyway, and being
// uniform makes the failure visible instead of path-dependent. Catch inside
// fn if it may throw. The guard itself is made without throwing once the
// callable exists (its move constructor must be noexcept, checked at
// compile time); if copying the callable into the guard throws, the guard
// was never made and fn does not run.
//
// The guard is neither copyable nor movable (copying would run fn twice);
// make it a named local. Prefer an RAII type (std::lock_guard,
// std::unique_lock) where one exists.
#pragma once

#include <type_traits>
#include <utility>

namespace goro {

template <class F>
class [[nodiscard]] defer {
  static_assert(std::is_invocable_v<F&>,
                "goro::defer needs a callable taking no arguments");
  static_assert(std::is_nothrow_move_constructible_v<F>,
                "goro::defer: the callable's move constructor must not throw");

 public:
  explicit defer(F fn) noexcept : fn_(std::move(fn)) {}
  defer(const defer&) = delete;
  defer& operator=(const defer&) = delete;
  defer(defer&&) = delete;
  defer& operator=(defer&&) = delete;
  ~defer() noexcept {
    if (active_) fn_();
  }

  // fn will not run. Idempotent.
  void dismiss() noexcept { active_ = false; }
  // Whether fn will still run.
  bool active() const noexcept { return active_; }

 private:
  F fn_;
  bool active_ = true;
};

template <class F>
defer(F) -> defer<F>;

}  // namespace goro
