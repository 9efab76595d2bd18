// panic.hpp: fatal errors (Go's throw, panic.go).
#pragma once

#include <cstdint>

struct _Unwind_Exception;

namespace goro::rt {

// Prints "fatal error: msg" (Go's throw) and exits with 2.
[[noreturn]] void fatal(const char* msg);
[[noreturn]] void fatalf(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));

// Flushes the program's buffered output (C stdio, std::cout, std::clog)
// before a report that ends the process, as a Go program's writes are
// never left in a buffer. Not async-signal-safe.
void flush_program_output();

struct G;
// goro_gcall_landed (panic.cpp): goexit's forced unwinding reached the
// goroutine's first frame; ends the goroutine (does not return) if exc is
// goexit's, else false.
bool goexit_landed(G* gp, _Unwind_Exception* exc);

}  // namespace goro::rt
