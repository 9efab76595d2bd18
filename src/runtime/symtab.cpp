// symtab.cpp: see symtab.hpp.
#include "runtime/symtab.hpp"

#include <cxxabi.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "runtime/dwarfline.hpp"

namespace goro::rt {

namespace {

struct func_sym {
  std::uintptr_t start;  // relative to the object's load bias
  std::uintptr_t size;
  std::string name;  // mangled
};

struct object_syms {
  std::string path;
  std::uintptr_t bias = 0;        // dlpi_addr
  std::uintptr_t lo = 0, hi = 0;  // loaded executable range (absolute)
  bool loaded = false;
  std::vector<func_sym> funcs;  // sorted by start
};

// One table per loaded object, read on first use. A plain std::mutex:
// symbolization runs outside the scheduler's locks (dumps, fatal paths).
std::mutex mu;
std::vector<std::unique_ptr<object_syms>>* objects = nullptr;

void load_file(object_syms& o) {
  o.loaded = true;
  std::string path = o.path.empty() ? "/proc/self/exe" : o.path;
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size < off_t(sizeof(Elf64_Ehdr))) {
    ::close(fd);
    return;
  }
  std::size_t size = std::size_t(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return;
  const auto* base = static_cast<const unsigned char*>(map);
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
      eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shoff == 0 ||
      eh->e_shoff + std::size_t(eh->e_shnum) * sizeof(Elf64_Shdr) > size) {
    munmap(map, size);
    return;
  }
  const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
  // Prefer the full symbol table; stripped objects still have .dynsym.
  for (Elf64_Word want : {SHT_SYMTAB, SHT_DYNSYM}) {
    for (int i = 0; i < eh->e_shnum; i++) {
      if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
      const Elf64_Shdr& strs = sh[sh[i].sh_link];
      if (sh[i].sh_offset + sh[i].sh_size > size ||
          strs.sh_offset + strs.sh_size > size)
        continue;
      const auto* syms =
          reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
      std::size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
      const char* names = reinterpret_cast<const char*>(base + strs.sh_offset);
      for (std::size_t k = 0; k < n; k++) {
        if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_value == 0)
          continue;
        if (syms[k].st_name >= strs.sh_size) continue;
        o.funcs.push_back(
            {syms[k].st_value, syms[k].st_size, names + syms[k].st_name});
      }
    }
    if (!o.funcs.empty()) break;
  }
  munmap(map, size);
  std::sort(
      o.funcs.begin(), o.funcs.end(),
      [](const func_sym& a, const func_sym& b) { return a.start < b.start; });
}

int on_object(struct dl_phdr_info* info, std::size_t, void* arg) {
  auto* out = static_cast<std::vector<std::unique_ptr<object_syms>>*>(arg);
  auto o = std::make_unique<object_syms>();
  o->path = info->dlpi_name ? info->dlpi_name : "";
  o->bias = info->dlpi_addr;
  o->lo = ~std::uintptr_t{0};
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const auto& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || (ph.p_flags & PF_X) == 0) continue;
    o->lo = std::min<std::uintptr_t>(o->lo, info->dlpi_addr + ph.p_vaddr);
    o->hi = std::max<std::uintptr_t>(o->hi,
                                     info->dlpi_addr + ph.p_vaddr + ph.p_memsz);
  }
  // The vDSO has no file to read.
  if (o->lo < o->hi && o->path.rfind("linux-vdso", 0) != 0)
    out->push_back(std::move(o));
  return 0;
}

object_syms* find_object(std::uintptr_t pc) {
  auto scan = [&]() -> object_syms* {
    for (auto& o : *objects)
      if (pc >= o->lo && pc < o->hi) return o.get();
    return nullptr;
  };
  if (objects == nullptr) {
    objects = new std::vector<std::unique_ptr<object_syms>>;
    dl_iterate_phdr(on_object, objects);
  }
  if (object_syms* o = scan()) return o;
  // A library loaded since: rescan once.
  objects->clear();
  dl_iterate_phdr(on_object, objects);
  return scan();
}

std::string demangle(const std::string& name) {
  // goro's private copies of inline functions and templates in the static
  // library (cmake/goro_text.cmake) carry this prefix.
  constexpr const char* priv = "goro.private.";
  std::size_t skip = name.rfind(priv, 0) == 0 ? std::strlen(priv) : 0;
  // Only C++ names: the demangler also reads type manglings ("f" would
  // print "float").
  if (name.compare(skip, 2, "_Z") != 0) return name.substr(skip);
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str() + skip, nullptr, nullptr, &status);
  if (d == nullptr && skip != 0) return name.substr(skip);
  if (d == nullptr) return name;
  std::string out(d);
  std::free(d);
  return out;
}

// Lookups with lines, by pc: reading the inline records walks a
// compilation unit's DIEs (dwarf_getscopes_die is linear in it), and dumps
// meet the same pcs again and again. Emptied when objects were loaded or
// unloaded since (a pc may then be other code), and when it is full.
std::unordered_map<std::uintptr_t, symbol_info>* line_cache = nullptr;
unsigned long long cache_generation = 0;
constexpr std::size_t line_cache_max = 8192;

int generation_cb(struct dl_phdr_info* info, std::size_t, void* arg) {
  *static_cast<unsigned long long*>(arg) = info->dlpi_adds + info->dlpi_subs;
  return 1;
}

symbol_info symbolize_locked(std::uintptr_t pc, bool lines);

}  // namespace

symbol_info symbolize(std::uintptr_t pc, bool lines) {
  std::lock_guard<std::mutex> lk(mu);
  if (!lines) return symbolize_locked(pc, false);
  unsigned long long gen = 0;
  dl_iterate_phdr(generation_cb, &gen);
  if (line_cache == nullptr)
    line_cache = new std::unordered_map<std::uintptr_t, symbol_info>;
  if (gen != cache_generation || line_cache->size() >= line_cache_max) {
    line_cache->clear();
    cache_generation = gen;
  }
  auto it = line_cache->find(pc);
  if (it != line_cache->end()) return it->second;
  symbol_info info = symbolize_locked(pc, true);
  line_cache->emplace(pc, info);
  return info;
}

namespace {

symbol_info symbolize_locked(std::uintptr_t pc, bool lines) {
  symbol_info info;
  if (lines) {
    std::vector<dwarf_frame> fr;
    if (dwarf_frames(pc, &fr)) {
      info.have_scopes = true;
      for (std::size_t i = 0; i + 1 < fr.size(); i++)
        info.inlined.push_back({fr[i].function, fr[i].file, fr[i].line,
                                fr[i].decl_file, fr[i].decl_line});
      info.file = fr.back().file;
      info.line = fr.back().line;
      info.decl_file = fr.back().decl_file;
      info.decl_line = fr.back().decl_line;
    } else {
      dwarf_line(pc, &info.file, &info.line);
    }
  }
  object_syms* o = find_object(pc);
  if (o == nullptr) return info;
  if (!o->loaded) load_file(*o);
  info.object = o->path.empty() ? "(executable)" : o->path;
  std::uintptr_t rel = pc - o->bias;
  info.offset = rel;
  auto it = std::upper_bound(
      o->funcs.begin(), o->funcs.end(), rel,
      [](std::uintptr_t v, const func_sym& f) { return v < f.start; });
  if (it == o->funcs.begin()) return info;
  --it;
  // Symbols of size 0 (hand-written assembly without .size) cover up to
  // the next symbol.
  if (it->size != 0 && rel >= it->start + it->size) return info;
  info.function = demangle(it->name);
  info.offset = rel - it->start;
  return info;
}

}  // namespace

}  // namespace goro::rt
