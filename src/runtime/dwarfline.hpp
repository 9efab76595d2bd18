// dwarfline.hpp: program counters to source file and line, from DWARF
// line tables, through elfutils' libdw when the build found its headers
// and the running system has libdw.so.1 (loaded with dlopen on first use,
// so libgoro does not depend on it). Without either, no lines: dumps keep
// printing the object's path.
#pragma once

#include <cstdint>
#include <string>

namespace goro::rt {

// The source line of pc (an address inside the instruction, as symbolize
// takes it); false when unknown. Not async-signal-safe. Callers serialize
// (symtab.cpp calls it under its lock).
bool dwarf_line(std::uintptr_t pc, std::string* file, int* line);

// Whether line information can be had at all (libdw built in and loaded).
// Thread-safe.
bool dwarf_lines_available();

}  // namespace goro::rt
