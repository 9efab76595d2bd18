// rwmutex.cpp: goro::rwmutex (Go's sync.RWMutex). The reader fast paths are
// inline in <goro/sync.hpp>.
//
// Writers serialise on the inner mutex w_. A writer announces itself by
// subtracting max_readers from reader_count_, which makes the count negative
// so that every later reader queues on reader_sem_. The writer then waits on
// writer_sem_ for the readers that were already inside: it adds their number
// to reader_wait_, and each of them, on leaving, decrements reader_wait_;
// the last one wakes the writer. On unlock the writer adds max_readers back
// and wakes exactly the readers that queued meanwhile.
#include <goro/sync.hpp>

#include "runtime/panic.hpp"
#include "runtime/sema.hpp"

namespace goro {

void rwmutex::lock_shared_slow() {
  // We are already counted in reader_count_; the writer's unlock releases
  // reader_sem_ once for each reader counted while it was announced.
  rt::semacquire(&reader_sem_, rt::wait_reason::sync_rwmutex_rlock);
}

void rwmutex::unlock_shared_slow(std::int32_t r) {
  // r + 1 is the count before our decrement: 0 means no reader held the
  // lock, -max_readers means only a writer holds it.
  if (r + 1 == 0 || r + 1 == -max_readers)
    rt::fatal("sync: RUnlock of unlocked RWMutex");
  // A writer is waiting; if we are the last reader it waits for, wake it.
  if (reader_wait_.fetch_sub(1, std::memory_order_acq_rel) - 1 == 0)
    rt::semrelease(&writer_sem_, false);
}

void rwmutex::lock() {
  // First exclude other writers.
  w_.lock_as(detail::lock_kind::rwmutex);
  // Then turn new readers away, learning how many are inside.
  const std::int32_t r =
      reader_count_.fetch_sub(max_readers, std::memory_order_acq_rel);
  // Wait for those. Readers that left between the two steps have already
  // decremented reader_wait_ below zero, so the add may bring it to zero.
  if (r != 0 && reader_wait_.fetch_add(r, std::memory_order_acq_rel) + r != 0) {
    rt::semacquire(&writer_sem_, rt::wait_reason::sync_rwmutex_lock);
  }
}

bool rwmutex::try_lock() noexcept {
  if (!w_.try_lock()) return false;
  std::int32_t expected = 0;
  if (!reader_count_.compare_exchange_strong(expected, -max_readers,
                                             std::memory_order_acquire,
                                             std::memory_order_relaxed)) {
    w_.unlock();
    return false;
  }
  return true;
}

void rwmutex::unlock() {
  // Let readers in again; r is the number that queued while we held it.
  const std::int32_t r =
      reader_count_.fetch_add(max_readers, std::memory_order_acq_rel) +
      max_readers;
  if (r >= max_readers) rt::fatal("sync: Unlock of unlocked RWMutex");
  // Let the next writer in, then wake the queued readers. (Go wakes the
  // readers first. Either way they go before the next writer: they are
  // counted in reader_count_ now, so a writer that gets w_ waits for them.
  // This order matters in C++, where nothing keeps the rwmutex alive: once
  // the last reader is woken, it may finish and destroy the rwmutex, so
  // that must be our last access. Until then the queued readers are still
  // inside lock_shared(), which keeps the object alive.)
  w_.unlock();
  for (std::int32_t i = 0; i < r; i++) rt::semrelease(&reader_sem_, false);
}

}  // namespace goro
