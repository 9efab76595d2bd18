// select.hpp: Go's select statement.
//
// Example (snippet: goroutine):
//   auto in = goro::make_chan<int>(1);
//   auto out = goro::make_chan<int>(1);
//   std::optional<int> v;
//   switch (goro::select(goro::case_recv(in, v),
//                        goro::case_send(out, 7),
//                        goro::case_default())) {
//     case 0: /* received *v, or in was closed (v empty) */ break;
//     case 1: /* sent 7 */ break;
//     case 2: /* nothing was ready */ break;
//   }
//
// select returns the index (in argument order) of the case that ran. Among
// ready cases it chooses uniformly at random; with case_default it never
// blocks, and it never takes the default while some case is ready. Nil
// channels are never ready; select() with no cases blocks forever. Each
// case also takes an optional callback, run when the case is chosen, after
// every channel lock is released (snippet: goroutine):
//   auto ch = goro::make_chan<int>(1);
//   goro::select(goro::case_send(ch, 7, [] { std::puts("sent 7"); }));
//   goro::select(goro::case_recv(ch, [](std::optional<int> v) {
//     std::printf("received %d\n", v.value_or(-1));  // nullopt: closed
//   }));
//
// case_recv accepts a chan<T> or a receive-only recv_chan<T> (such as
// goro::after(d) or a timer's c).
//
// Evaluation order: Go evaluates every case's channel operand and send
// value exactly once, in source order, before the select starts. Here they
// are ordinary C++ function arguments: each is evaluated exactly once
// before the select starts, but C++ leaves the order among the arguments
// unspecified (g++ and clang++ differ). If the expressions have side
// effects that depend on each other (goro::after(d) calls, counters,
// functions that produce the channel), evaluate them into variables first
// (snippet: goroutine):
//   auto t = goro::after(1s);
//   auto out = pick_output();
//   int v = next_value();
//   goro::select(goro::case_recv(t), goro::case_send(out, v));
#pragma once

#include <cstddef>
#include <goro/chan.hpp>
#include <optional>
#include <type_traits>
#include <utility>

namespace goro {

namespace detail {

struct no_callback {};

template <class T, class Out, class Fn>
class recv_case {
 public:
  recv_case(hchan* c, Out out, Fn fn) : c_(c), out_(out), fn_(std::move(fn)) {}
  void fill(scase& s) { s = scase{c_, bytes_, false}; }
  void complete(bool ok) {
    std::optional<T> v;
    if (ok) {
      T* p = std::launder(reinterpret_cast<T*>(bytes_));
      v.emplace(std::move(*p));
      p->~T();
    }
    if constexpr (!std::is_same_v<Out, std::nullptr_t>) {
      // Only move construction is required of T, not assignment.
      out_->reset();
      if (v) out_->emplace(std::move(*v));
    }
    if constexpr (!std::is_same_v<Fn, no_callback>) fn_(std::move(v));
  }

 private:
  hchan* c_;
  Out out_;
  Fn fn_;
  alignas(T) unsigned char bytes_[sizeof(T)];
};

template <class Out, class Fn>
class recv_case<void, Out, Fn> {
 public:
  recv_case(hchan* c, Out out, Fn fn) : c_(c), out_(out), fn_(std::move(fn)) {}
  void fill(scase& s) { s = scase{c_, &e_, false}; }
  void complete(bool ok) {
    if constexpr (!std::is_same_v<Out, std::nullptr_t>) *out_ = ok;
    if constexpr (!std::is_same_v<Fn, no_callback>) fn_(ok);
  }

 private:
  hchan* c_;
  Out out_;
  Fn fn_;
  empty_elem e_;
};

template <class T, class Fn>
class send_case {
 public:
  template <class V>
  send_case(const chan<T>& ch, V&& v, Fn fn)
      : c_(ch.raw()), v_(std::forward<V>(v)), fn_(std::move(fn)) {}
  void fill(scase& s) { s = scase{c_, &v_, true}; }
  void complete(bool) {
    if constexpr (!std::is_same_v<Fn, no_callback>) fn_();
  }

 private:
  hchan* c_;
  T v_;
  Fn fn_;
};

template <class Fn>
class send_case<void, Fn> {
 public:
  send_case(const chan<void>& ch, Fn fn) : c_(ch.raw()), fn_(std::move(fn)) {}
  void fill(scase& s) { s = scase{c_, &e_, true}; }
  void complete(bool) {
    if constexpr (!std::is_same_v<Fn, no_callback>) fn_();
  }

 private:
  hchan* c_;
  Fn fn_;
  empty_elem e_;
};

struct default_case {};

// The element type of a channel a case can receive from: chan<T> or
// recv_chan<T>.
template <class C>
struct recv_source {};
template <class T>
struct recv_source<chan<T>> {
  using type = T;
};
template <class T>
struct recv_source<recv_chan<T>> {
  using type = T;
};
template <class C>
using recv_elem_t = typename recv_source<std::remove_cvref_t<C>>::type;
template <class C>
concept receivable = requires {
  typename recv_elem_t<C>;
};

template <class C>
constexpr bool is_default_v = std::is_same_v<std::decay_t<C>, default_case>;

}  // namespace detail

// The receive cases take a chan<T> or a recv_chan<T> (written C below).
//
// Receive into `out` (nullopt when the channel is closed and drained).
template <detail::receivable C>
  requires(!std::is_void_v<detail::recv_elem_t<C>>)
auto case_recv(const C& ch, std::optional<detail::recv_elem_t<C>>& out) {
  using T = detail::recv_elem_t<C>;
  return detail::recv_case<T, std::optional<T>*, detail::no_callback>(ch.raw(),
                                                                      &out, {});
}
// Receive and discard.
template <detail::receivable C>
auto case_recv(const C& ch) {
  return detail::recv_case<detail::recv_elem_t<C>, std::nullptr_t,
                           detail::no_callback>(ch.raw(), nullptr, {});
}
// Receive and call fn(std::optional<T>) (fn(bool) for chan<void>).
template <detail::receivable C, class Fn>
  requires(!std::is_same_v<std::decay_t<Fn>,
                           std::optional<detail::recv_elem_t<C>>> &&
           !std::is_same_v<Fn, bool&>)
auto case_recv(const C& ch, Fn&& fn) {
  return detail::recv_case<detail::recv_elem_t<C>, std::nullptr_t,
                           std::decay_t<Fn>>(ch.raw(), nullptr,
                                             std::forward<Fn>(fn));
}
// chan<void>: *ok tells whether a signal arrived (false: closed).
template <detail::receivable C>
  requires std::is_void_v<detail::recv_elem_t<C>>
auto case_recv(const C& ch, bool& ok) {
  return detail::recv_case<void, bool*, detail::no_callback>(ch.raw(), &ok, {});
}

// Send v (moved into the case; sent only if this case is chosen).
template <class T, class V>
  requires(!std::is_void_v<T>)
auto case_send(const chan<T>& ch, V&& v) {
  return detail::send_case<T, detail::no_callback>(ch, std::forward<V>(v), {});
}
template <class T, class V, class Fn>
  requires(!std::is_void_v<T>)
auto case_send(const chan<T>& ch, V&& v, Fn&& fn) {
  return detail::send_case<T, std::decay_t<Fn>>(ch, std::forward<V>(v),
                                                std::forward<Fn>(fn));
}
inline auto case_send(const chan<void>& ch) {
  return detail::send_case<void, detail::no_callback>(ch, {});
}
template <class Fn>
auto case_send(const chan<void>& ch, Fn&& fn) {
  return detail::send_case<void, std::decay_t<Fn>>(ch, std::forward<Fn>(fn));
}

inline detail::default_case case_default() { return {}; }

template <class... Cases>
std::size_t select(Cases&&... cases) {
  constexpr std::size_t n = sizeof...(Cases);
  constexpr std::size_t ndefault =
      (std::size_t(0) + ... + std::size_t(detail::is_default_v<Cases>));
  static_assert(ndefault <= 1, "goro::select: at most one case_default()");
  constexpr std::size_t nch = n - ndefault;
  detail::scase sc[nch == 0 ? 1 : nch];
  std::size_t default_index = n;
  [[maybe_unused]] std::size_t k = 0, i = 0;
  (
      [&](auto& c) {
        if constexpr (detail::is_default_v<decltype(c)>)
          default_index = i;
        else
          c.fill(sc[k++]);
        i++;
      }(cases),
      ...);
  bool recv_ok = false;
  int chosen = detail::selectgo(sc, int(nch), ndefault == 0, &recv_ok);
  if (chosen < 0) return default_index;
  // The argument index is found in the same walk that runs the chosen
  // case, not read from a table afterwards: when the callback cannot
  // return ([[noreturn]]), g++ -O2 would otherwise deduce an impossible
  // index for the read after it and report a false -Warray-bounds.
  std::size_t result = n;
  k = 0;
  i = 0;
  (
      [&](auto& c) {
        if constexpr (!detail::is_default_v<decltype(c)>) {
          if (k++ == std::size_t(chosen)) {
            result = i;
            c.complete(recv_ok);
          }
        }
        i++;
      }(cases),
      ...);
  return result;
}

}  // namespace goro
