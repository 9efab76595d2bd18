// wait_group.hpp: Go's sync.WaitGroup. Waiters park (goroutines) or block
// (plain threads) until the counter drops to zero; reusable once it has.
#pragma once

#include <atomic>
#include <cstdint>

namespace goro {

class wait_group {
 public:
  wait_group() = default;
  wait_group(const wait_group&) = delete;
  wait_group& operator=(const wait_group&) = delete;
  ~wait_group() = default;

  // Adds delta (may be negative) to the counter. Throws std::logic_error if
  // the counter goes negative, or if add races with wait the way Go's
  // "WaitGroup misuse" panic describes.
  void add(std::int64_t delta = 1);
  void done() { add(-1); }
  // Blocks until the counter is zero.
  void wait();

 private:
  // High 32 bits: counter; low 32 bits: number of waiters (as Go's state).
  std::atomic<std::uint64_t> state_{0};
  // The runtime semaphore the waiters sleep on.
  std::uint32_t sema_{0};
};

}  // namespace goro
