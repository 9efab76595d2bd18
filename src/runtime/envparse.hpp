// envparse.hpp: overflow-free reading of the numbers in the settings taken
// from the environment (GORO_TIMESLICE, GORO_STACK_SIZE, GORO_DEBUG): a
// value that does not fit is reported as too large, never wrapped.
#pragma once

#include <cstdint>

namespace goro::rt {

enum class num_parse {
  ok,          // *out holds the value
  not_number,  // no decimal digit at the start
  too_large,   // the value does not fit (in 64 bits, or times the unit)
};

// Reads the decimal digits at *s (no sign or spaces), advancing *s past
// all of them, even past the point where the value stopped fitting in 64
// bits (then too_large).
num_parse parse_digits(const char** s, std::uint64_t* out);

// v * unit into *out if the product fits and is at most max; false
// otherwise (nothing stored).
bool mul_within(std::uint64_t v, std::uint64_t unit, std::uint64_t max,
                std::uint64_t* out);

}  // namespace goro::rt
