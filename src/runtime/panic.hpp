// panic.hpp: fatal errors (Go's throw, panic.go).
#pragma once

#include <cstdint>

namespace goro::rt {

// Prints "fatal error: msg" (Go's throw) and exits with 2.
[[noreturn]] void fatal(const char* msg);
[[noreturn]] void fatalf(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));

}  // namespace goro::rt
