// detail/chan_rt.hpp: the type-erased channel runtime that goro::chan<T>
// and goro::select are thin templates over (Go's chan.go and select.go).
#pragma once

#include <cstddef>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <utility>

namespace goro {

// Misuse of a channel that Go reports with a panic: send on a closed
// channel, close of a nil or closed channel.
struct channel_error : std::logic_error {
  using std::logic_error::logic_error;
};

namespace detail {

struct hchan;

// How the runtime moves and destroys elements it only knows as bytes.
struct elem_ops {
  std::size_t size;
  std::size_t align;
  void (*move)(void* dst, void* src) noexcept;  // construct dst from src
  void (*destroy)(void* p) noexcept;
};

template <class T>
struct elem_ops_for {
  static void move(void* dst, void* src) noexcept {
    ::new (dst) T(std::move(*static_cast<T*>(src)));
  }
  static void destroy(void* p) noexcept { static_cast<T*>(p)->~T(); }
  static constexpr elem_ops ops{sizeof(T), alignof(T), &move, &destroy};
};

struct empty_elem {};
template <>
struct elem_ops_for<void> {
  static void move(void*, void*) noexcept {}
  static void destroy(void*) noexcept {}
  static constexpr elem_ops ops{0, 1, &move, &destroy};
};

// The largest channel buffer makechan accepts, in bytes (Go bounds it by
// maxAlloc). A chan<void> element counts as one byte, so every element type
// has a finite capacity limit.
inline constexpr std::size_t max_chan_bytes = std::size_t(1) << 40;

// Throws std::length_error("makechan: size out of range") when cap slots
// (of max(size rounded up to align, 1) bytes each) exceed max_chan_bytes.
hchan* makechan(const elem_ops* ops, std::size_t cap);
void chan_retain(hchan* c) noexcept;
void chan_release(hchan* c) noexcept;

// Sends the element at *elem (moved from). block=false: returns false
// instead of waiting. Throws channel_error on a closed channel.
bool chansend(hchan* c, void* elem, bool block);
// Receives into uninitialised storage at elem. Returns false if it would
// block (block=false); otherwise true, with *received false when the
// channel is closed and drained (nothing was constructed at elem).
bool chanrecv(hchan* c, void* elem, bool block, bool* received);
void closechan(hchan* c);
std::size_t chanlen(const hchan* c) noexcept;
std::size_t chancap(const hchan* c) noexcept;

// One case of a select: a channel (null: never ready) and the element to
// send from or the storage to receive into.
struct scase {
  hchan* c;
  void* elem;
  bool send;
};
// Go's selectgo: returns the index of the case that ran, or -1 when
// block is false and no case was ready. *recv_ok tells whether a chosen
// receive got a value (false: the channel was closed).
int selectgo(scase* cases, int ncases, bool block, bool* recv_ok);

}  // namespace detail
}  // namespace goro
