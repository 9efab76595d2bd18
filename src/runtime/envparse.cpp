// envparse.cpp: see envparse.hpp.
#include "runtime/envparse.hpp"

namespace goro::rt {

num_parse parse_digits(const char** s, std::uint64_t* out) {
  const char* p = *s;
  if (*p < '0' || *p > '9') return num_parse::not_number;
  std::uint64_t v = 0;
  bool fits = true;
  for (; *p >= '0' && *p <= '9'; p++)
    if (fits && (__builtin_mul_overflow(v, 10u, &v) ||
                 __builtin_add_overflow(v, std::uint64_t(*p - '0'), &v)))
      fits = false;
  *s = p;
  if (!fits) return num_parse::too_large;
  *out = v;
  return num_parse::ok;
}

bool mul_within(std::uint64_t v, std::uint64_t unit, std::uint64_t max,
                std::uint64_t* out) {
  std::uint64_t r = 0;
  if (__builtin_mul_overflow(v, unit, &r) || r > max) return false;
  *out = r;
  return true;
}

}  // namespace goro::rt
