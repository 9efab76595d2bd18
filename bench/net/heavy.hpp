// heavy.hpp: the CPU work behind /heavy in bench/net's HTTP server, the
// same instructions as heavyWork in bench/go/net/main.go: kHeavyRounds
// rounds of the splitmix64 step, each round depending on the one before
// (no vectorising, no closed form), about 1 ms on a 2.5-3 GHz core. Both
// twins print the time of one call (`--heavy-time`, `heavy-time`), which
// bench/net/run.sh shows in its header.
#pragma once

#include <cstdint>

namespace netbench {

inline constexpr int kHeavyRounds = 285000;

inline std::uint64_t heavy_work(std::uint64_t seed) {
  std::uint64_t x = seed;
  for (int i = 0; i < kHeavyRounds; i++) {
    x += 0x9e3779b97f4a7c15ULL;
    std::uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    x = z ^ (z >> 31);
  }
  return x;
}

}  // namespace netbench
