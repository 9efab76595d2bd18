// dynselect.cpp: goro::dynamic_select, Go's reflect.Select. It only builds
// the case array that selectgo (select.cpp) takes, so a select over cases
// known at run time has exactly the static select's algorithm: random poll
// order, lock order by channel address, park on every channel.
//
// Invariants of a case (detail::dyn_case):
//   - c is a counted reference (chan_retain) or null.
//   - elem is storage for one element of ops's type, allocated with the
//     type's alignment, or the shared empty element for chan<void>.
//   - full: elem holds a live element. A send case is full until its value
//     is sent (chan<void> send cases: always). A receive case is full only
//     between a select() that received into it and take() or the next
//     select(); at most one is (pending_).
#include <goro/select.hpp>
#include <new>
#include <stdexcept>
#include <string>

namespace goro {

namespace {

// What every chan<void> case points at: the runtime never reads or writes
// a zero-sized element.
detail::empty_elem shared_empty;

// selectgo indexes cases with 16 bits (Go's reflect.Select allows 65536).
constexpr std::size_t max_cases = 65535;

void* alloc_elem(const detail::elem_ops* ops) {
  if (ops->size == 0) return &shared_empty;
  return ::operator new(ops->size, std::align_val_t(ops->align));
}

void free_elem(const detail::elem_ops* ops, void* p) noexcept {
  if (ops->size == 0 || p == nullptr) return;
  // Unsized: clang enables sized deallocation only with -fsized-deallocation.
  ::operator delete(p, std::align_val_t(ops->align));
}

[[noreturn]] void bad_case(std::size_t i, const char* why) {
  throw std::invalid_argument("goro::dynamic_select: case " +
                              std::to_string(i) + ": " + why);
}

}  // namespace

dynamic_select::dynamic_select(dynamic_select&& o) noexcept
    : cases_(std::move(o.cases_)),
      default_(std::exchange(o.default_, npos)),
      pending_(std::exchange(o.pending_, npos)) {
  o.cases_.clear();
}

dynamic_select& dynamic_select::operator=(dynamic_select&& o) noexcept {
  if (this != &o) {
    clear();
    cases_ = std::move(o.cases_);
    o.cases_.clear();
    default_ = std::exchange(o.default_, npos);
    pending_ = std::exchange(o.pending_, npos);
  }
  return *this;
}

dynamic_select::~dynamic_select() { clear(); }

void dynamic_select::clear() noexcept {
  while (!cases_.empty()) pop_back();
  default_ = npos;
  pending_ = npos;
}

std::size_t dynamic_select::add(detail::dyn_case::kind_t k, detail::hchan* c,
                                const detail::elem_ops* ops) {
  if (cases_.size() - (default_ != npos) >= max_cases)
    throw std::length_error("goro::dynamic_select: too many cases (max 65535)");
  detail::dyn_case dc;
  dc.kind = k;
  dc.ops = ops;
  dc.elem = alloc_elem(ops);
  try {
    cases_.push_back(dc);
  } catch (...) {
    free_elem(ops, dc.elem);
    throw;
  }
  detail::chan_retain(c);
  cases_.back().c = c;
  return cases_.size() - 1;
}

std::size_t dynamic_select::add_default() {
  if (default_ != npos)
    throw std::logic_error("goro::dynamic_select: multiple default cases");
  detail::dyn_case dc;
  dc.kind = detail::dyn_case::dflt;
  cases_.push_back(dc);
  default_ = cases_.size() - 1;
  return default_;
}

void dynamic_select::pop_back() noexcept {
  detail::dyn_case& dc = cases_.back();
  if (dc.kind != detail::dyn_case::dflt) {
    empty(dc);
    free_elem(dc.ops, dc.elem);
    detail::chan_release(dc.c);
  }
  if (dc.drop) dc.drop(dc.fn);
  if (default_ == cases_.size() - 1) default_ = npos;
  if (pending_ == cases_.size() - 1) pending_ = npos;
  cases_.pop_back();
}

void dynamic_select::set_callback(std::size_t i, void* fn,
                                  void (*call)(detail::dyn_case&, void*, bool),
                                  void (*drop)(void*) noexcept) noexcept {
  detail::dyn_case& dc = cases_[i];
  dc.fn = fn;
  dc.call = call;
  dc.drop = drop;
}

void dynamic_select::empty(detail::dyn_case& dc) noexcept {
  if (dc.full && dc.ops->size != 0) dc.ops->destroy(dc.elem);
  dc.full = false;
}

detail::dyn_case& dynamic_select::checked(std::size_t i,
                                          detail::dyn_case::kind_t k,
                                          const detail::elem_ops* ops) {
  if (i >= cases_.size()) bad_case(i, "no such case");
  detail::dyn_case& dc = cases_[i];
  if (dc.kind != k)
    bad_case(i, k == detail::dyn_case::recv ? "not a receive case"
                                            : "not a send case");
  if (dc.ops != ops) bad_case(i, "element type mismatch");
  return dc;
}

void dynamic_select::replace_chan(std::size_t i, detail::hchan* c,
                                  const detail::elem_ops* ops, bool can_recv,
                                  bool can_send) {
  if (i >= cases_.size()) bad_case(i, "no such case");
  detail::dyn_case& dc = cases_[i];
  if (dc.kind == detail::dyn_case::dflt) bad_case(i, "the default case");
  if (dc.ops != ops) bad_case(i, "element type mismatch");
  if (dc.kind == detail::dyn_case::recv && !can_recv)
    bad_case(i, "a receive case needs a channel that can receive");
  if (dc.kind == detail::dyn_case::send && !can_send)
    bad_case(i, "a send case needs a channel that can send");
  detail::chan_retain(c);
  detail::chan_release(dc.c);
  dc.c = c;
}

void dynamic_select::disable(std::size_t i) {
  if (i >= cases_.size()) bad_case(i, "no such case");
  detail::dyn_case& dc = cases_[i];
  if (dc.kind == detail::dyn_case::dflt) bad_case(i, "the default case");
  detail::chan_release(dc.c);
  dc.c = nullptr;
}

dynamic_select::result dynamic_select::select() {
  // The value received last time and not taken is discarded now: the
  // runtime constructs into empty storage.
  if (pending_ != npos) {
    empty(cases_[pending_]);
    pending_ = npos;
  }
  sc_.clear();
  map_.clear();
  sc_.reserve(cases_.size());
  map_.reserve(cases_.size());
  for (std::size_t i = 0; i < cases_.size(); i++) {
    detail::dyn_case& dc = cases_[i];
    if (dc.kind == detail::dyn_case::dflt) continue;
    const bool send = dc.kind == detail::dyn_case::send;
    if (send && dc.c != nullptr && !dc.full)
      throw std::logic_error(
          "goro::dynamic_select: send case " + std::to_string(i) +
          " has no value (it was sent; give it one with set_send_value)");
    sc_.push_back(detail::scase{dc.c, dc.elem, send});
    map_.push_back(static_cast<std::uint32_t>(i));
  }
  bool recv_ok = false;
  int chosen = detail::selectgo(sc_.data(), static_cast<int>(sc_.size()),
                                default_ == npos, &recv_ok);
  if (chosen < 0) return {default_, false};
  const std::size_t i = map_[static_cast<std::size_t>(chosen)];
  detail::dyn_case& dc = cases_[i];
  if (dc.kind == detail::dyn_case::send) {
    // The runtime moved the value out; the moved-from object is ours to
    // destroy. A chan<void> signal stays armed.
    if (dc.ops->size != 0) empty(dc);
    recv_ok = false;
  } else if (recv_ok && dc.ops->size != 0) {
    dc.full = true;
    pending_ = i;
  }
  if (dc.call != nullptr) dc.call(dc, dc.fn, recv_ok);
  return {i, recv_ok};
}

}  // namespace goro
