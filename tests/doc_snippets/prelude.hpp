// prelude.hpp: what the fragments among the documentation's code examples
// may assume (tests/doc_snippets/check.sh compiles them with it).
//
// A fragment (a ```cpp block without main() in README.md or docs/*.md, or
// an example marked in a header) is compiled inside a function, in its own
// namespace, with this header included and `using namespace goro_snippets;`
// in force: the goro headers, the usual standard headers, the chrono
// literals, and the placeholder names the examples use for "your code".
// Complete programs are compiled on their own, exactly as written, without
// this header.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <deque>
#include <goro/goro.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <thread>
#include <vector>

namespace goro_snippets {

using namespace std::chrono_literals;

// Placeholders for user code in the examples.
inline void work() {}
inline void step() {}
inline void download() {}
inline void log(const char*) {}
inline void deep_recursion() {}
inline std::vector<int> data(4096);
inline std::size_t n = data.size();
inline void crunch(int& x) { x++; }
inline goro::mutex m;
inline goro::chan<int> pick_output() { return goro::make_chan<int>(1); }
inline int next_value() { return 42; }

}  // namespace goro_snippets
