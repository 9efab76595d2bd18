// dwarfline.hpp: program counters to source file and line, from DWARF
// line tables, through elfutils' libdw when the build found its headers
// and the running system has libdw.so.1 (loaded with dlopen on first use,
// so libgoro does not depend on it). Without either, no lines: dumps keep
// printing the object's path.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace goro::rt {

// The source line of pc (an address inside the instruction, as symbolize
// takes it); false when unknown. Not async-signal-safe. Callers serialize
// (symtab.cpp calls it under its lock).
bool dwarf_line(std::uintptr_t pc, std::string* file, int* line);

// One function of the inline chain at a pc (Go's inlined frames).
struct dwarf_frame {
  std::string function;   // as the demangler prints it
  std::string file;       // the position in this function: for all but
  int line = 0;           // the innermost, the call to the one before it
  std::string decl_file;  // where the function is declared (a lambda's
  int decl_line = 0;      // line, for its readable name)
};

// The functions at pc, innermost first: the inlined ones, then the
// machine-code function that holds them (last), each with its position,
// from DW_TAG_inlined_subroutine's DW_AT_call_file/DW_AT_call_line. false
// (and out empty) when unknown. Callers serialize, as for dwarf_line.
bool dwarf_frames(std::uintptr_t pc, std::vector<dwarf_frame>* out);

// Whether line information can be had at all (libdw built in and loaded).
// Thread-safe.
bool dwarf_lines_available();

}  // namespace goro::rt
