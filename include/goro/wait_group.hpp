// wait_group.hpp: Go's sync.WaitGroup. Waiters park (goroutines) or block
// (plain threads) until the counter drops to zero; reusable once it has.
#pragma once

#include <atomic>
#include <concepts>
#include <cstdint>
#include <functional>
#include <goro/runtime.hpp>
#include <utility>

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

  // Go 1.25's WaitGroup.Go: add(1), then run fn() in a new goroutine that
  // calls done() when fn returns, also when it ends by an exception or by
  // goro::goexit (snippet: goroutine):
  //   goro::wait_group wg;
  //   std::atomic<int> n{0};
  //   for (int i = 0; i < 10; i++) wg.go([&n] { n++; });
  //   wg.wait();  // n == 10
  template <class F>
    requires std::invocable < std::decay_t<F>
  & > void go(F&& fn) {
    add(1);
    try {
      goro::go([this, f = std::forward<F>(fn)]() mutable {
        struct done_on_exit {
          wait_group* wg;
          ~done_on_exit() { wg->done(); }
        } d{this};
        std::invoke(f);
      });
    } catch (...) {
      done();  // the goroutine was not started
      throw;
    }
  }

 private:
  // High 32 bits: counter; low 32 bits: number of waiters (as Go's state).
  std::atomic<std::uint64_t> state_{0};
  // The runtime semaphore the waiters sleep on.
  std::uint32_t sema_{0};
};

}  // namespace goro
