// chan.hpp: Go's channels. goro::chan<T> is a reference to a channel:
// copies share it, a default-constructed chan is nil.
//
// Example (snippet: goroutine):
//   auto ch = goro::make_chan<int>(10);  // buffered, capacity 10
//   goro::go([ch] { ch.send(42); ch.close(); });
//   for (int v : ch) std::printf("%d\n", v);  // receives until closed
//
// Send on a closed channel and close of a nil or closed channel throw
// goro::channel_error (Go panics). Receiving from a closed, drained channel
// gives std::nullopt. Operations on a nil channel block forever. Everything
// works from plain threads too: a blocked plain thread sleeps until a
// goroutine (or another thread) completes the operation.
//
// T may be any movable type, move-only types included; its move (or copy)
// constructor must not throw. chan<void> carries no payload (Go's
// chan struct{}): send(), try_send(), recv() -> bool, try_recv() -> bool and
// range-for, one iteration per signal (snippet: goroutine):
//   auto quit = goro::make_chan<void>(1);
//   quit.send();
//   quit.close();
//   for (auto _ : quit) std::puts("signal");  // once, then closed and drained
//
// make_chan<T>(cap) throws std::length_error("makechan: size out of range")
// (Go panics) when the buffer would exceed detail::max_chan_bytes (2^40
// bytes): cap * sizeof(T), rounded up to T's alignment, for chan<T>; cap
// itself for chan<void>, whose elements count one byte each.
//
// Directional views (Go's <-chan T and chan<- T), for APIs that hand out
// only one end of a channel. Both convert implicitly from chan<T> and share
// its channel (a copy of one pointer and a reference count):
//   - goro::recv_chan<T>: recv, try_recv, len, cap, range-for and
//     goro::case_recv; no send, no close. The channels of goro::after,
//     goro::timer and goro::ticker are recv_chans.
//   - goro::send_chan<T>: send, try_send, close (Go allows close on a
//     chan<- T), len, cap and goro::case_send; no receive.
// Neither converts back to chan<T>, nor one into the other (snippet: decls):
//   goro::recv_chan<int> numbers(int n) {  // the caller can only receive
//     auto ch = goro::make_chan<int>(n);
//     goro::go([out = goro::send_chan<int>(ch), n] {
//       for (int i = 0; i < n; i++) out.send(i);
//       out.close();
//     });
//     return ch;
//   }
#pragma once

#include <cstddef>
#include <goro/detail/chan_rt.hpp>
#include <optional>
#include <type_traits>
#include <utility>

namespace goro {

template <class T>
class chan;

// What a range-for over a chan<void> yields per signal (Go's struct{}{}).
// [[maybe_unused]]: `for (auto _ : ch)` compiles without an unused-variable
// warning.
struct [[maybe_unused]] signal_t {};

// Makes a channel with room for `cap` buffered elements (0: unbuffered).
template <class T>
chan<T> make_chan(std::size_t cap = 0);

namespace detail {
template <class T>
struct chan_base {
  hchan* c_ = nullptr;

  chan_base() = default;
  explicit chan_base(hchan* c) : c_(c) {}
  chan_base(const chan_base& o) noexcept : c_(o.c_) { chan_retain(c_); }
  chan_base(chan_base&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  chan_base& operator=(const chan_base& o) noexcept {
    if (c_ != o.c_) {
      chan_retain(o.c_);
      chan_release(c_);
      c_ = o.c_;
    }
    return *this;
  }
  chan_base& operator=(chan_base&& o) noexcept {
    if (this != &o) {
      chan_release(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  ~chan_base() { chan_release(c_); }

  // The operations that do not depend on T (shared by chan<T>, chan<void>).
  void close() const { closechan(c_); }
  std::size_t len() const noexcept { return chanlen(c_); }
  std::size_t cap() const noexcept { return chancap(c_); }
  explicit operator bool() const noexcept { return c_ != nullptr; }
  hchan* raw() const noexcept { return c_; }
};
}  // namespace detail

template <class T>
class chan : private detail::chan_base<T> {
  static_assert(std::is_move_constructible_v<T>,
                "goro::chan<T> needs a movable T");
  using base = detail::chan_base<T>;
  using base::c_;
  template <class U>
  friend chan<U> make_chan(std::size_t);

  explicit chan(detail::hchan* c) : base(c) {}

  // Uninitialised storage the runtime constructs a received T into.
  struct slot {
    alignas(T) unsigned char bytes[sizeof(T)];
    T* get() { return std::launder(reinterpret_cast<T*>(bytes)); }
  };

 public:
  using value_type = T;

  chan() = default;  // nil channel

  // Blocks until a receiver takes v or there is room in the buffer.
  void send(T v) const { detail::chansend(c_, &v, true); }
  // Non-blocking send: false if it would block.
  bool try_send(T v) const { return detail::chansend(c_, &v, false); }
  // Blocks until a value arrives; nullopt once the channel is closed and
  // drained.
  std::optional<T> recv() const {
    slot s;
    bool got = false;
    detail::chanrecv(c_, s.bytes, true, &got);
    return take(s, got);
  }
  // Non-blocking receive: nullopt if nothing is ready (or closed and
  // drained; *closed tells which).
  std::optional<T> try_recv(bool* closed = nullptr) const {
    slot s;
    bool got = false;
    bool ready = detail::chanrecv(c_, s.bytes, false, &got);
    if (closed) *closed = ready && !got;
    return take(s, got);
  }
  using base::cap;
  using base::close;
  using base::len;
  using base::raw;
  using base::operator bool;
  friend bool operator==(const chan& a, const chan& b) noexcept {
    return a.c_ == b.c_;
  }

  // range-for: receives until the channel is closed.
  class iterator {
   public:
    explicit iterator(const chan* ch) : ch_(ch) { ++*this; }
    iterator& operator++() {
      cur_ = ch_->recv();
      return *this;
    }
    T& operator*() { return *cur_; }
    bool operator!=(std::nullptr_t) const { return cur_.has_value(); }
    bool operator==(std::nullptr_t) const { return !cur_.has_value(); }

   private:
    const chan* ch_;
    std::optional<T> cur_;
  };
  iterator begin() const { return iterator(this); }
  std::nullptr_t end() const { return nullptr; }

 private:
  static std::optional<T> take(slot& s, bool got) {
    if (!got) return std::nullopt;
    std::optional<T> out(std::move(*s.get()));
    s.get()->~T();
    return out;
  }
};

// A channel without payload (Go's chan struct{}).
template <>
class chan<void> : private detail::chan_base<void> {
  using base = detail::chan_base<void>;
  using base::c_;
  template <class U>
  friend chan<U> make_chan(std::size_t);
  explicit chan(detail::hchan* c) : base(c) {}

 public:
  using value_type = void;
  chan() = default;
  void send() const {
    detail::empty_elem e;
    detail::chansend(c_, &e, true);
  }
  bool try_send() const {
    detail::empty_elem e;
    return detail::chansend(c_, &e, false);
  }
  // true: received a signal; false: closed and drained.
  bool recv() const {
    detail::empty_elem e;
    bool got = false;
    detail::chanrecv(c_, &e, true, &got);
    return got;
  }
  // Non-blocking receive: true if a signal was taken; false if nothing is
  // ready (or closed and drained; *closed tells which).
  bool try_recv(bool* closed = nullptr) const {
    detail::empty_elem e;
    bool got = false;
    bool ready = detail::chanrecv(c_, &e, false, &got);
    if (closed) *closed = ready && !got;
    return got;
  }
  using base::cap;
  using base::close;
  using base::len;
  using base::raw;
  using base::operator bool;
  friend bool operator==(const chan& a, const chan& b) noexcept {
    return a.c_ == b.c_;
  }

  // range-for (Go's `for range ch`): one iteration per signal received,
  // until the channel is closed and drained:  for (auto _ : ch) { ... }
  class iterator {
   public:
    explicit iterator(const chan* ch) : ch_(ch) { ++*this; }
    iterator& operator++() {
      more_ = ch_->recv();
      return *this;
    }
    signal_t operator*() const noexcept { return {}; }
    bool operator!=(std::nullptr_t) const { return more_; }
    bool operator==(std::nullptr_t) const { return !more_; }

   private:
    const chan* ch_;
    bool more_ = false;
  };
  iterator begin() const { return iterator(this); }
  std::nullptr_t end() const { return nullptr; }
};

// A receive-only view of a channel (Go's <-chan T): built implicitly from a
// chan<T> (sharing it), it can receive, be ranged over and be used in
// goro::case_recv, but it cannot send or close, and it does not convert
// back to chan<T>. Default-constructed: a nil channel.
template <class T>
class recv_chan {
 public:
  using value_type = T;
  using iterator = typename chan<T>::iterator;

  recv_chan() = default;  // nil channel
  recv_chan(chan<T> ch) noexcept : ch_(std::move(ch)) {}

  // As chan<T>::recv / try_recv (chan<void>: bool).
  auto recv() const { return ch_.recv(); }
  auto try_recv(bool* closed = nullptr) const { return ch_.try_recv(closed); }
  std::size_t len() const noexcept { return ch_.len(); }
  std::size_t cap() const noexcept { return ch_.cap(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ch_); }
  detail::hchan* raw() const noexcept { return ch_.raw(); }
  friend bool operator==(const recv_chan& a, const recv_chan& b) noexcept {
    return a.ch_ == b.ch_;
  }

  // range-for: receives until the channel is closed and drained.
  iterator begin() const { return ch_.begin(); }
  std::nullptr_t end() const { return nullptr; }

 private:
  chan<T> ch_;
};

// A send-only view of a channel (Go's chan<- T): built implicitly from a
// chan<T> (sharing it), it can send, try_send and close, and be used in
// goro::case_send, but it cannot receive, and it does not convert back to
// chan<T>. Default-constructed: a nil channel.
template <class T>
class send_chan {
 public:
  using value_type = T;

  send_chan() = default;  // nil channel
  send_chan(chan<T> ch) noexcept : ch_(std::move(ch)) {}

  // As chan<T>::send / try_send (chan<void>: no argument).
  template <class... V>
    requires requires(const chan<T>& c, V&&... v) {
      c.send(std::forward<V>(v)...);
    }
  void send(V&&... v) const { ch_.send(std::forward<V>(v)...); }
  template <class... V>
    requires requires(const chan<T>& c, V&&... v) {
      c.try_send(std::forward<V>(v)...);
    }
  bool try_send(V&&... v) const { return ch_.try_send(std::forward<V>(v)...); }
  // Throws goro::channel_error on a nil or already-closed channel.
  void close() const { ch_.close(); }
  std::size_t len() const noexcept { return ch_.len(); }
  std::size_t cap() const noexcept { return ch_.cap(); }
  explicit operator bool() const noexcept { return static_cast<bool>(ch_); }
  detail::hchan* raw() const noexcept { return ch_.raw(); }
  friend bool operator==(const send_chan& a, const send_chan& b) noexcept {
    return a.ch_ == b.ch_;
  }

 private:
  chan<T> ch_;
};

template <class T>
chan<T> make_chan(std::size_t cap) {
  return chan<T>(detail::makechan(&detail::elem_ops_for<T>::ops, cap));
}

}  // namespace goro
