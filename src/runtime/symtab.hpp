// symtab.hpp: program counters to function names (Go's symtab.go,
// FuncForPC). Reads the ELF symbol tables (.symtab, else .dynsym) of the
// executable and of every loaded shared object from their files, so the
// program needs no -rdynamic; names are demangled. File and line come from
// DWARF through libdw when it is available (dwarfline.hpp).
#pragma once

#include <cstdint>
#include <string>

namespace goro::rt {

struct symbol_info {
  std::string function;       // demangled; empty if unknown
  std::string object;         // path of the executable or shared object
  std::uintptr_t offset = 0;  // pc - function start (or - object base)
  std::string file;           // source file; empty if unknown
  int line = 0;               // its line, when file is set
};

// Not async-signal-safe (reads files, allocates). Thread-safe. `lines`:
// also look up the source line (slower).
symbol_info symbolize(std::uintptr_t pc, bool lines = false);

}  // namespace goro::rt
