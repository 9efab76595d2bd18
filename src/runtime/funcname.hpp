// funcname.hpp: function names as goroutine dumps print them (Go's
// funcNameForPrint): what the program wrote, not the demangler's plumbing.
#pragma once

#include <string>

namespace goro::rt {

// The qualified name without a template function's return type
// ("void std::__invoke_impl<...>(...)" -> "std::__invoke_impl<...>(...)").
std::string func_base_name(const std::string& demangled);

// A lambda reads as where it was written: "main::{lambda()#1}::operator()()
// const", declared at app.cpp:48, prints "main::lambda at app.cpp:48";
// lambdas around it print "lambda". decl_file/decl_line: where the last
// lambda's call operator is declared (empty/0: unknown, "lambda#1" then).
// Other names are only stripped of a return type and of a GCC clone
// suffix (" [clone .constprop.0]").
std::string func_print_name(const std::string& demangled,
                            const std::string& decl_file, int decl_line);

}  // namespace goro::rt
