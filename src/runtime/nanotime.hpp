// nanotime.hpp: the runtime's monotonic clock (Go's nanotime).
#pragma once

#include <time.h>

#include <cstdint>

namespace goro::rt {

inline std::int64_t nanotime() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

}  // namespace goro::rt
