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
// goro::after(d) or a timer's c); case_send a chan<T> or a send-only
// send_chan<T>. For a set of cases known only at run time (Go's
// reflect.Select), see goro::dynamic_select below.
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
#include <cstdint>
#include <goro/chan.hpp>
#include <optional>
#include <type_traits>
#include <utility>
#include <vector>

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
  send_case(hchan* c, V&& v, Fn fn)
      : c_(c), v_(std::forward<V>(v)), fn_(std::move(fn)) {}
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
  send_case(hchan* c, Fn fn) : c_(c), fn_(std::move(fn)) {}
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

// The element type of a channel a case can send to: chan<T> or
// send_chan<T>.
template <class C>
struct send_target {};
template <class T>
struct send_target<chan<T>> {
  using type = T;
};
template <class T>
struct send_target<send_chan<T>> {
  using type = T;
};
template <class C>
using send_elem_t = typename send_target<std::remove_cvref_t<C>>::type;
template <class C>
concept sendable = requires {
  typename send_elem_t<C>;
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

// The send cases take a chan<T> or a send-only send_chan<T> (C below).
//
// Send v (moved into the case; sent only if this case is chosen).
template <detail::sendable C, class V>
  requires(!std::is_void_v<detail::send_elem_t<C>>)
auto case_send(const C& ch, V&& v) {
  return detail::send_case<detail::send_elem_t<C>, detail::no_callback>(
      ch.raw(), std::forward<V>(v), {});
}
// Send v and call fn() if this case is chosen.
template <detail::sendable C, class V, class Fn>
  requires(!std::is_void_v<detail::send_elem_t<C>>)
auto case_send(const C& ch, V&& v, Fn&& fn) {
  return detail::send_case<detail::send_elem_t<C>, std::decay_t<Fn>>(
      ch.raw(), std::forward<V>(v), std::forward<Fn>(fn));
}
// chan<void>: send a signal.
template <detail::sendable C>
  requires std::is_void_v<detail::send_elem_t<C>>
auto case_send(const C& ch) {
  return detail::send_case<void, detail::no_callback>(ch.raw(), {});
}
template <detail::sendable C, class Fn>
  requires std::is_void_v<detail::send_elem_t<C>>
auto case_send(const C& ch, Fn&& fn) {
  return detail::send_case<void, std::decay_t<Fn>>(ch.raw(),
                                                   std::forward<Fn>(fn));
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

// ---------------------------------------------------------------------------
// goro::dynamic_select: a select over cases known only at run time (Go's
// reflect.Select), e.g. fan-in of N channels without a goroutine per
// channel. Cases are added one by one (any mix of element types, chan<T>,
// recv_chan<T>, send_chan<T>), and select() runs Go's selectgo over them:
// the same engine, fairness (a random poll order each time) and rules as
// goro::select. Example (snippet: goroutine):
//   std::vector<goro::chan<int>> inputs;
//   for (int i = 0; i < 3; i++) {
//     inputs.push_back(goro::make_chan<int>(1));
//     inputs.back().send(i);
//     inputs.back().close();
//   }
//   goro::dynamic_select sel;
//   for (const auto& in : inputs) sel.add_recv(in);
//   int sum = 0;
//   for (std::size_t open = inputs.size(); open > 0;) {
//     auto r = sel.select();                // blocks: no default case
//     if (!r.recv_ok) {                     // closed and drained:
//       sel.disable(r.index);               // ignore it from now on
//       open--;
//     } else {
//       sum += *sel.take<int>(r.index);     // the value received
//     }
//   }
//   std::printf("sum %d\n", sum);          // sum 3
//
// Rules, as reflect.Select's:
//   - add_recv / add_send / add_default return the case's index, which is
//     what select() reports. At most one default case (std::logic_error);
//     with one, select() never blocks. At most 65535 channel cases
//     (std::length_error).
//   - A nil channel (default-constructed, or a case disable()d or given a
//     nil channel by set_chan) is never ready; a select whose cases are all
//     nil and that has no default blocks forever, as select {} does.
//   - A receive case keeps what it received until take<T>(index) moves it
//     out or the next select() discards it; a callback given to add_recv
//     gets it instead (fn(std::optional<T>), or fn(bool) for chan<void>),
//     run by select() after every channel lock is released.
//   - A send case owns its value; a select() that sends it consumes it, and
//     the case must be given a new one (set_send_value) before a later
//     select() may use it (otherwise select() throws std::logic_error).
//   - A send on a closed channel throws goro::channel_error, as goro::select.
// A dynamic_select is used by one goroutine at a time; it holds a reference
// to each of its channels. It is movable, not copyable.
class dynamic_select;

namespace detail {
// One case, type-erased. elem: storage for one element of the channel's
// type (ops says which), owned by the case; `full` tells whether it holds a
// live element (a send value, or a received value not taken yet).
struct dyn_case {
  hchan* c = nullptr;  // a counted reference, or null (nil channel)
  void* elem = nullptr;
  const elem_ops* ops = nullptr;
  enum kind_t : std::uint8_t { recv, send, dflt } kind = recv;
  bool full = false;
  // Run by select() when this case is chosen (optional).
  void (*call)(dyn_case&, void* fn, bool ok) = nullptr;
  void* fn = nullptr;  // the callable, owned (destroyed by drop)
  void (*drop)(void* fn) noexcept = nullptr;
};
}  // namespace detail

class dynamic_select {
 public:
  // What select() did: the index of the case that ran (the default case's
  // index when none was ready), and for a receive whether a value arrived
  // (false: the channel was closed and drained).
  struct result {
    std::size_t index;
    bool recv_ok;
  };

  dynamic_select() = default;
  dynamic_select(dynamic_select&& o) noexcept;
  dynamic_select& operator=(dynamic_select&& o) noexcept;
  dynamic_select(const dynamic_select&) = delete;
  dynamic_select& operator=(const dynamic_select&) = delete;
  ~dynamic_select();

  // A receive case on a chan<T> or recv_chan<T>.
  template <detail::receivable C>
  std::size_t add_recv(const C& ch) {
    return add(detail::dyn_case::recv, ch.raw(),
               &detail::elem_ops_for<detail::recv_elem_t<C>>::ops);
  }
  // A receive case whose value goes to fn (std::optional<T>; bool for
  // chan<void>) when select() chooses it.
  template <detail::receivable C, class Fn>
  std::size_t add_recv(const C& ch, Fn&& fn) {
    using T = detail::recv_elem_t<C>;
    using F = std::decay_t<Fn>;
    std::size_t i = add_recv(ch);
    set_callback(
        i, new F(std::forward<Fn>(fn)),
        [](detail::dyn_case& dc, void* f, bool ok) {
          if constexpr (std::is_void_v<T>) {
            (*static_cast<F*>(f))(ok);
          } else {
            (*static_cast<F*>(f))(take_from<T>(dc));
          }
        },
        [](void* f) noexcept { delete static_cast<F*>(f); });
    return i;
  }
  // A send case on a chan<T> or send_chan<T>, owning v until it is sent.
  template <detail::sendable C, class V>
    requires(!std::is_void_v<detail::send_elem_t<C>>)
  std::size_t add_send(const C& ch, V&& v) {
    using T = detail::send_elem_t<C>;
    std::size_t i =
        add(detail::dyn_case::send, ch.raw(), &detail::elem_ops_for<T>::ops);
    try {
      set_send_value<T>(i, std::forward<V>(v));
    } catch (...) {
      pop_back();
      throw;
    }
    return i;
  }
  // A send case on a chan<void> (a signal; never consumed).
  template <detail::sendable C>
    requires std::is_void_v<detail::send_elem_t<C>> std::size_t add_send(
        const C& ch) {
      std::size_t i = add(detail::dyn_case::send, ch.raw(),
                          &detail::elem_ops_for<void>::ops);
      cases_[i].full = true;
      return i;
    }
  // Makes select() non-blocking: it returns this case's index when no other
  // case is ready.
  std::size_t add_default();

  // Gives send case i a new value to send (T: the case's element type).
  template <class T, class V = T>
  void set_send_value(std::size_t i, V&& v) {
    detail::dyn_case& dc =
        checked(i, detail::dyn_case::send, &detail::elem_ops_for<T>::ops);
    empty(dc);
    ::new (dc.elem) T(std::forward<V>(v));
    dc.full = true;
  }
  // Points case i at another channel of the same element type and a
  // direction that allows the case's operation (a nil one disables it).
  // Throws std::invalid_argument otherwise.
  template <class C>
    requires(detail::receivable<C> || detail::sendable<C>)
  void set_chan(std::size_t i, const C& ch) {
    const detail::elem_ops* ops;
    if constexpr (detail::receivable<C>)
      ops = &detail::elem_ops_for<detail::recv_elem_t<C>>::ops;
    else
      ops = &detail::elem_ops_for<detail::send_elem_t<C>>::ops;
    replace_chan(i, ch.raw(), ops, detail::receivable<C>, detail::sendable<C>);
  }
  // Sets case i's channel to nil: it is never chosen again (Go's idiom for
  // an input that has been closed).
  void disable(std::size_t i);

  // The value that receive case i received in the last select(), moved out
  // (nullopt if it received none, or it was already taken). Throws
  // std::invalid_argument if case i is not a receive case of element type T.
  template <class T>
  std::optional<T> take(std::size_t i) {
    return take_from<T>(
        checked(i, detail::dyn_case::recv, &detail::elem_ops_for<T>::ops));
  }

  // Runs the select (Go's selectgo) over the cases added.
  result select();

  std::size_t size() const noexcept { return cases_.size(); }

 private:
  std::size_t add(detail::dyn_case::kind_t k, detail::hchan* c,
                  const detail::elem_ops* ops);
  void pop_back() noexcept;
  void set_callback(std::size_t i, void* fn,
                    void (*call)(detail::dyn_case&, void*, bool),
                    void (*drop)(void*) noexcept) noexcept;
  detail::dyn_case& checked(std::size_t i, detail::dyn_case::kind_t k,
                            const detail::elem_ops* ops);
  void replace_chan(std::size_t i, detail::hchan* c,
                    const detail::elem_ops* ops, bool can_recv, bool can_send);
  static void empty(detail::dyn_case& dc) noexcept;
  void clear() noexcept;

  template <class T>
  static std::optional<T> take_from(detail::dyn_case& dc) {
    if (!dc.full) return std::nullopt;
    T* p = std::launder(static_cast<T*>(dc.elem));
    std::optional<T> out(std::move(*p));
    p->~T();
    dc.full = false;
    return out;
  }

  std::vector<detail::dyn_case> cases_;
  std::size_t default_ = npos;  // the default case's index
  std::size_t pending_ = npos;  // the receive case holding an untaken value
  // Scratch for select(), kept to avoid allocating on every call.
  std::vector<detail::scase> sc_;
  std::vector<std::uint32_t> map_;  // sc_ index -> case index

  static constexpr std::size_t npos = std::size_t(-1);
};

}  // namespace goro
