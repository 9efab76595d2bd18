// A shared library of the user's for preempt_userlib_test: its call-free
// loop is only preemptible once the program adds the library's code
// (goro::debug::add_async_preempt_library).
#include <atomic>
#include <cstdint>

extern "C" __attribute__((visibility("default"), noinline)) std::uint64_t
userlib_spin(const std::atomic<bool>* stop) {
  std::uint64_t x = 1;
  while (!stop->load(std::memory_order_relaxed))
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}
