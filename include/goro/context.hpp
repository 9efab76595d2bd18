// context.hpp: Go's context package. A context carries a cancellation
// signal, an optional deadline and request-scoped values down a tree of
// calls and goroutines.
//
// Example (snippet: goroutine):
//   auto jobs = goro::make_chan<int>();
//   auto [ctx, cancel] = goro::with_timeout(goro::background(), 100ms);
//   goro::wait_group wg;
//   wg.add(1);
//   // Capture a copy (c = ctx), not the structured binding itself: C++20
//   // allows that, but clang++ 14 (before 16) rejects it.
//   goro::go([c = ctx, jobs, &wg] {
//     std::optional<int> j;
//     for (;;) {
//       switch (goro::select(goro::case_recv(c.done()),
//                            goro::case_recv(jobs, j))) {
//         case 0:  // cancelled or timed out: c.err() says which
//           wg.done();
//           return;
//         case 1:
//           crunch(*j);
//           break;
//       }
//     }
//   });
//   jobs.send(1);
//   cancel();  // always call it (Go's `defer cancel()`)
//   wg.wait();
//
// goro::context is a cheap handle (one shared_ptr) to an immutable node;
// copies refer to the same context. Derived contexts form a tree:
//   - with_cancel(parent): done when its cancel_func is called or when the
//     parent is done, whichever comes first.
//   - with_deadline(parent, t) / with_timeout(parent, d): also done (with
//     err() == context_errc::deadline_exceeded) at the deadline. A deadline
//     later than the parent's is not used: the child inherits the parent's.
//   - with_value(parent, key, v): carries one value, otherwise as parent.
// Cancelling a context cancels all of its descendants; deriving from a
// context that is already done gives a context that is done at once, with
// the parent's error. Ordering guarantees: err() is non-empty exactly when
// done() is closed; when a cancel_func returns, its context and all of its
// descendants are done; and whoever sees a context done (its channel closed)
// also sees every descendant done (Go closes the parent's channel first;
// here descendants' channels close first, which only adds ordering).
//
// Resources: a cancellable context is registered with its nearest
// cancellable ancestor (and, with a deadline, owns a runtime timer) until it
// is cancelled. Calling its cancel_func releases both at once. A context
// whose cancel_func is never called stays registered until the parent is
// cancelled or destroyed, or its timer fires (Go's "lostcancel").
//
// Errors are std::error_code values of goro::context_category(). They
// compare equal to goro::context_errc::canceled (Go's context.Canceled) or
// goro::context_errc::deadline_exceeded (context.DeadlineExceeded), and to
// the portable conditions std::errc::operation_canceled and
// std::errc::timed_out; message() is Go's text (snippet: goroutine):
//   auto [ctx, cancel] = goro::with_cancel(goro::background());
//   cancel();
//   if (std::error_code e = ctx.err()) {  // Go: if err := ctx.Err(); ...
//     if (e == goro::context_errc::canceled &&
//         e == std::errc::operation_canceled)
//       std::printf("%s\n", e.message().c_str());  // "context canceled"
//   }
//
// Everything is safe to use from any number of goroutines and plain threads
// at once; a plain thread blocked in ctx.done().recv() sleeps until the
// context is done.
#pragma once

#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <goro/chan.hpp>
#include <goro/time.hpp>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <type_traits>
#include <utility>

namespace goro {

// Why a context is done (Go's context.Canceled and context.DeadlineExceeded).
// A context that is not done reports the empty std::error_code.
enum class context_errc {
  canceled = 1,           // "context canceled"
  deadline_exceeded = 2,  // "context deadline exceeded"
};

// The category of context errors: name "context"; equivalent to the generic
// conditions std::errc::operation_canceled and std::errc::timed_out.
const std::error_category& context_category() noexcept;

inline std::error_code make_error_code(context_errc e) noexcept {
  return {static_cast<int>(e), context_category()};
}

}  // namespace goro

template <>
struct std::is_error_code_enum<goro::context_errc> : std::true_type {};

namespace goro {

class context;
class cancel_func;
class cancel_cause_func;

namespace detail {
struct ctx_node;     // one immutable node of the context tree
struct cancel_core;  // the mutable cancellation state of a cancellable node

// The value stored under `key` in n or its ancestors, or nullptr.
const void* ctx_value(const ctx_node* n, const void* key) noexcept;
context ctx_with_value(const context& parent, const void* key,
                       const char* key_name, std::shared_ptr<const void> val);

// Test hooks. Contexts registered with c's cancellation state (the state of
// c itself, or of its nearest cancellable ancestor for a value context); 0
// for background()/todo().
std::size_t context_num_children(const context& c);
// Cancellation states alive in the process (each with_cancel /
// with_deadline / with_timeout makes one; freed when nothing refers to it).
std::int64_t context_live_states() noexcept;
}  // namespace detail

// A key for with_value / context::value, typed by the value it selects.
// Keys are compared by identity (address), like Go's unexported key types,
// so two key objects never collide even with equal names; define each key
// once, typically as a namespace-scope variable (snippet: decls):
//   inline constexpr goro::context_key<std::string> request_id{"request_id"};
//   goro::context tagged(const goro::context& ctx) {
//     return goro::with_value(ctx, request_id, "r-17");
//   }
//   std::string id_of(const goro::context& ctx) {
//     std::optional<std::string> id = ctx.value(request_id);
//     return id ? *id : "none";
//   }
//
// The name is only used by to_string(context).
template <class T>
class context_key {
  static_assert(std::is_object_v<T> && !std::is_array_v<T> &&
                    std::is_same_v<T, std::remove_cv_t<T>>,
                "goro::context_key<T>: T must be a non-const object type");

 public:
  constexpr context_key() noexcept = default;
  constexpr explicit context_key(const char* name) noexcept : name_(name) {}
  context_key(const context_key&) = delete;
  context_key& operator=(const context_key&) = delete;

  constexpr const char* name() const noexcept { return name_; }

 private:
  const char* name_ = nullptr;
};

// Go's context.Context: a handle to an immutable context node. A
// default-constructed (or moved-from) context is background().
class context {
 public:
  context() noexcept = default;

  // A channel that is closed when this context is done. The same channel
  // on every call. Nil (never ready, blocks forever) for contexts that can
  // never be done: background(), todo() and value contexts derived only
  // from them.
  chan<void> done() const;

  // Empty while the context is not done; then context_errc::canceled or
  // context_errc::deadline_exceeded, never changing again. Once done()
  // is seen closed, err() is non-empty.
  std::error_code err() const noexcept;

  // The time at which this context is done because of a deadline (its own
  // or an ancestor's), if any.
  std::optional<time_point> deadline() const noexcept;

  // The value stored under key by the nearest with_value that used it, or
  // nullopt. value() copies it; value_ptr() points into the context tree
  // and stays valid as long as some context derived from the with_value
  // that stored it is alive.
  template <class T>
  std::optional<T> value(const context_key<T>& key) const {
    if (const T* p = value_ptr(key)) return std::optional<T>(*p);
    return std::nullopt;
  }
  template <class T>
  const T* value_ptr(const context_key<T>& key) const noexcept {
    return static_cast<const T*>(
        detail::ctx_value(n_.get(), static_cast<const void*>(&key)));
  }

  // Same node (not merely equivalent contexts).
  friend bool operator==(const context& a, const context& b) noexcept {
    return a.n_ == b.n_;
  }

 private:
  friend context background() noexcept;
  friend context todo() noexcept;
  friend std::pair<context, cancel_func> with_cancel(const context&);
  friend std::pair<context, cancel_cause_func> with_cancel_cause(
      const context&);
  friend std::pair<context, cancel_func> with_deadline(const context&,
                                                       time_point);
  friend context without_cancel(const context&);
  friend std::error_code cause(const context&);
  friend std::function<bool()> context_after_func(const context&,
                                                  std::function<void()>);
  friend context detail::ctx_with_value(const context&, const void*,
                                        const char*,
                                        std::shared_ptr<const void>);
  friend std::size_t detail::context_num_children(const context&);
  friend std::string to_string(const context&);

  explicit context(std::shared_ptr<const detail::ctx_node> n) noexcept
      : n_(std::move(n)) {}

  std::shared_ptr<const detail::ctx_node> n_;  // null: background
};

// Go's context.CancelFunc: cancels the context it came with (and all of
// that context's descendants) with context_errc::canceled, unregisters it
// from its parent and stops its timer. Copyable; calling it again, or from
// several goroutines and threads at once, is harmless. A
// default-constructed cancel_func does nothing.
class cancel_func {
 public:
  cancel_func() noexcept = default;
  void operator()() const noexcept;
  explicit operator bool() const noexcept { return c_ != nullptr; }

 private:
  friend std::pair<context, cancel_func> with_cancel(const context&);
  friend std::pair<context, cancel_func> with_deadline(const context&,
                                                       time_point);
  explicit cancel_func(std::shared_ptr<detail::cancel_core> c) noexcept
      : c_(std::move(c)) {}

  std::shared_ptr<detail::cancel_core> c_;
};

// Go's context.CancelCauseFunc: as cancel_func, and also records why:
// goro::cause(ctx) then returns `why` (an empty `why` records
// context_errc::canceled). Only the first cancellation counts; ctx.err() is
// context_errc::canceled either way.
class cancel_cause_func {
 public:
  cancel_cause_func() noexcept = default;
  void operator()(std::error_code why = {}) const noexcept;
  explicit operator bool() const noexcept { return c_ != nullptr; }

 private:
  friend std::pair<context, cancel_cause_func> with_cancel_cause(
      const context&);
  explicit cancel_cause_func(std::shared_ptr<detail::cancel_core> c) noexcept
      : c_(std::move(c)) {}

  std::shared_ptr<detail::cancel_core> c_;
};

// The root of every context tree: never done, no deadline, no values.
context background() noexcept;
// Like background(); marks code where the right context is not yet known.
context todo() noexcept;

// A child of parent that is done when the returned cancel_func is called or
// when parent is done, whichever happens first.
std::pair<context, cancel_func> with_cancel(const context& parent);

// A child of parent that is also done at d (err() == deadline_exceeded).
// If parent's deadline is already earlier than d this is with_cancel(parent)
// (and the child reports parent's deadline). A deadline already in the past
// gives a context that is done at once.
std::pair<context, cancel_func> with_deadline(const context& parent,
                                              time_point d);

// with_deadline(parent, now + timeout). Saturates instead of overflowing.
std::pair<context, cancel_func> with_timeout(const context& parent,
                                             std::chrono::nanoseconds timeout);

// Go 1.20's WithCancelCause: as with_cancel, but the cancel function takes
// the reason, which goro::cause reports (snippet: goroutine):
//   auto [ctx, cancel] = goro::with_cancel_cause(goro::background());
//   cancel(std::make_error_code(std::errc::connection_reset));
//   // ctx.err() == context_errc::canceled, as with any cancellation;
//   // goro::cause(ctx) == std::errc::connection_reset.
//   std::printf("%s\n", goro::cause(ctx).message().c_str());
std::pair<context, cancel_cause_func> with_cancel_cause(const context& parent);

// Go 1.20's context.Cause: why c is done. Empty while c is not done (or if
// it can never be). For a context cancelled by a cancel_cause_func, the
// cause given (or context_errc::canceled); for one that reached its
// deadline, context_errc::deadline_exceeded; otherwise c.err(). Children
// inherit their parent's cause when the parent's cancellation reaches them.
std::error_code cause(const context& c);

// Go 1.21's context.AfterFunc (goro::after_func is time's): arranges for
// fn() to run in its own goroutine once ctx is done, at once if it already
// is. The returned stop function unregisters fn: it returns true if that
// kept fn from being started, false if fn had already been started or
// stopped. stop does not wait for a running fn. fn runs at most once. If
// ctx can never be done, fn never runs (snippet: goroutine):
//   auto [ctx, cancel] = goro::with_cancel(goro::background());
//   auto fired = goro::make_chan<void>();
//   auto stop = goro::context_after_func(ctx, [fired] { fired.close(); });
//   cancel();
//   fired.recv();           // fn ran in a goroutine of its own
//   bool stopped = stop();  // false: too late
//   (void)stopped;
std::function<bool()> context_after_func(const context& ctx,
                                         std::function<void()> fn);

// Go 1.21's WithoutCancel: a child of parent that keeps its values but is
// never done (done() is nil, err() empty, no deadline), whatever happens to
// parent: for work that must outlive the request that started it.
context without_cancel(const context& parent);

// A child of parent that carries v (converted to T) under key.
template <class T, class V>
  requires std::constructible_from<T, V&&> context
  with_value(const context& parent, const context_key<T>& key, V&& v) {
    return detail::ctx_with_value(
        parent, static_cast<const void*>(&key), key.name(),
        std::make_shared<const T>(std::forward<V>(v)));
  }

// A description in Go's format, e.g.
// "context.Background.WithCancel.WithValue(request_id)".
std::string to_string(const context& c);

}  // namespace goro
