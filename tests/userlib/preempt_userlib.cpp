// A shared library of the user's for preempt_userlib_test: its call-free
// loop is only preemptible once the program adds the library's code
// (goro::debug::add_async_preempt_library). The flag is read with the
// builtin, not std::atomic::load, which an -O0 build calls out of line (in
// the program's copy, which is preemptible).
#include <atomic>
#include <cstdint>

extern "C" __attribute__((visibility("default"), noinline)) std::uint64_t
userlib_spin(const std::atomic<bool>* stop) {
  std::uint64_t x = 1;
  while (
      !__atomic_load_n(reinterpret_cast<const bool*>(stop), __ATOMIC_RELAXED))
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}
