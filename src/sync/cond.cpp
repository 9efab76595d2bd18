// cond.cpp: goro::cond (Go's sync.Cond) over the runtime's notify list.
#include <goro/sync.hpp>
#include <new>

#include "runtime/notify_list.hpp"

namespace goro {

namespace {

// The notify list lives in the cond's storage (as Go's sync.notifyList
// mirrors runtime.notifyList, checked by notifyListCheck).
static_assert(sizeof(rt::notify_list) <= sizeof(detail::runtime_storage<32>));
static_assert(alignof(rt::notify_list) <= alignof(detail::runtime_storage<32>));

inline rt::notify_list* list_of(detail::runtime_storage<32>& s) {
  return std::launder(reinterpret_cast<rt::notify_list*>(s.bytes));
}

}  // namespace

cond::cond() noexcept {
  ::new (static_cast<void*>(list_.bytes)) rt::notify_list;
}

cond::~cond() { list_of(list_)->~notify_list(); }

std::uint32_t cond::ticket() noexcept {
  return rt::notify_list_add(list_of(list_));
}

void cond::wait_ticket(std::uint32_t t) {
  rt::notify_list_wait(list_of(list_), t);
}

void cond::signal() noexcept { rt::notify_list_notify_one(list_of(list_)); }

void cond::broadcast() noexcept { rt::notify_list_notify_all(list_of(list_)); }

}  // namespace goro
