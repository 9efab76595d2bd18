// symtab.hpp: program counters to function names (Go's symtab.go,
// FuncForPC). Reads the ELF symbol tables (.symtab, else .dynsym) of the
// executable and of every loaded shared object from their files, so the
// program needs no -rdynamic; names are demangled. File and line come from
// DWARF through libdw when it is available (dwarfline.hpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace goro::rt {

// A function inlined at a pc (from DWARF's inline records).
struct inlined_frame {
  std::string function;   // demangled
  std::string file;       // the position in it: the innermost's is pc's
  int line = 0;           // line, each other's its call to the one before
  std::string decl_file;  // where it is declared (names lambdas)
  int decl_line = 0;
};

struct symbol_info {
  std::string function;       // demangled; empty if unknown
  std::string object;         // path of the executable or shared object
  std::uintptr_t offset = 0;  // pc - function start (or - object base)
  std::string file;           // source file; empty if unknown
  int line = 0;               // its line, when file is set: with inlined
                              // functions at pc, the call of the outermost
  // With `lines` and DWARF inline records: the functions inlined at pc,
  // innermost first (Go prints them as frames of their own), and where
  // the machine-code function is declared.
  std::vector<inlined_frame> inlined;
  bool have_scopes = false;  // the inline records were read
  std::string decl_file;
  int decl_line = 0;
};

// Not async-signal-safe (reads files, allocates). Thread-safe. `lines`:
// also look up the source line (slower).
symbol_info symbolize(std::uintptr_t pc, bool lines = false);

}  // namespace goro::rt
