// dwarfline.cpp: see dwarfline.hpp.
//
// One Dwfl session for the process, built on first use from
// /proc/self/maps (dwfl_linux_proc_report), kept for the process's life and
// re-reported when dl_iterate_phdr says objects were loaded since. The few
// dwfl_* functions are looked up with dlsym in libdw.so.1; the header is
// only needed for their types.
#include "runtime/dwarfline.hpp"

#ifdef GORO_HAVE_LIBDW
#include <dlfcn.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" void goro_on_gstack(void* sp, void (*fn)(void*), void* arg);
#endif

#include <filesystem>
#include <mutex>

namespace goro::rt {

#ifdef GORO_HAVE_LIBDW

namespace {

struct libdw_api {
  decltype(&::dwfl_begin) begin;
  decltype(&::dwfl_report_begin) report_begin;
  decltype(&::dwfl_linux_proc_report) proc_report;
  decltype(&::dwfl_report_end) report_end;
  decltype(&::dwfl_addrmodule) addrmodule;
  decltype(&::dwfl_module_getsrc) getsrc;
  decltype(&::dwfl_lineinfo) lineinfo;
  decltype(&::dwfl_line_comp_dir) comp_dir;
  decltype(&::dwfl_linux_proc_find_elf) find_elf;
  decltype(&::dwfl_standard_find_debuginfo) find_debuginfo;
};

std::once_flag load_once;
libdw_api api;
bool loaded = false;

Dwfl_Callbacks callbacks;
Dwfl* session = nullptr;
unsigned long long reported_adds = 0;  // dlpi_adds at the last report

template <class F>
bool sym(void* h, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(h, name));
  return *out != nullptr;
}

void load() {
  void* h = dlopen("libdw.so.1", RTLD_NOW | RTLD_LOCAL);
  if (h == nullptr) return;
  bool ok = sym(h, "dwfl_begin", &api.begin) &&
            sym(h, "dwfl_report_begin", &api.report_begin) &&
            sym(h, "dwfl_linux_proc_report", &api.proc_report) &&
            sym(h, "dwfl_report_end", &api.report_end) &&
            sym(h, "dwfl_addrmodule", &api.addrmodule) &&
            sym(h, "dwfl_module_getsrc", &api.getsrc) &&
            sym(h, "dwfl_lineinfo", &api.lineinfo) &&
            sym(h, "dwfl_line_comp_dir", &api.comp_dir) &&
            sym(h, "dwfl_linux_proc_find_elf", &api.find_elf) &&
            sym(h, "dwfl_standard_find_debuginfo", &api.find_debuginfo);
  if (!ok) {
    dlclose(h);
    return;
  }
  loaded = true;  // h stays open for the process's life
}

int adds_cb(struct dl_phdr_info* info, std::size_t, void* arg) {
  *static_cast<unsigned long long*>(arg) = info->dlpi_adds;
  return 1;
}

unsigned long long current_adds() {
  unsigned long long adds = 0;
  dl_iterate_phdr(adds_cb, &adds);
  return adds;
}

// (Re)reads the process's mappings; false if the session cannot be had.
bool report() {
  if (session == nullptr) {
    callbacks.find_elf = api.find_elf;
    callbacks.find_debuginfo = api.find_debuginfo;
    callbacks.section_address = nullptr;
    callbacks.debuginfo_path = nullptr;
    session = api.begin(&callbacks);
    if (session == nullptr) return false;
  }
  reported_adds = current_adds();
  api.report_begin(session);
  int r = api.proc_report(session, getpid());
  api.report_end(session, nullptr, nullptr);
  return r == 0;
}

}  // namespace

bool dwarf_lines_available() {
  std::call_once(load_once, load);
  return loaded;
}

namespace {

// The lookup itself, on lookup_stack.
bool lookup(std::uintptr_t pc, std::string* file, int* line) {
  if (session == nullptr || current_adds() != reported_adds) {
    if (!report()) return false;
  }
  Dwfl_Module* mod = api.addrmodule(session, pc);
  if (mod == nullptr) return false;
  Dwfl_Line* l = api.getsrc(mod, pc);
  if (l == nullptr) return false;
  int lineno = 0;
  const char* src =
      api.lineinfo(l, nullptr, &lineno, nullptr, nullptr, nullptr);
  if (src == nullptr || lineno <= 0) return false;
  // Builds that pass relative paths (ccache's base_dir) record
  // "../../src/x.cpp" relative to the compilation directory: print the
  // full path, clean, as Go does.
  std::string path;
  const char* dir = src[0] != '/' ? api.comp_dir(l) : nullptr;
  if (dir != nullptr && dir[0] == '/') {
    path = dir;
    path += '/';
  }
  path += src;
  *file = path.find("/.") != std::string::npos
              ? std::filesystem::path(path).lexically_normal().string()
              : path;
  *line = lineno;
  return true;
}

// libdw reads a line table with large arrays on the stack (a few hundred
// KiB in dwarf_getsrclines), more than sysmon's 256 KiB stack, an M's
// scheduler stack or a goroutine's may have left: lookups run on a stack of
// their own, mapped on first use (address space; pages are touched only
// as deep as libdw goes), with a guard page below. One lookup at a time:
// the caller's lock (symtab's) covers it.
constexpr std::size_t lookup_stack_size = 8 << 20;
void* lookup_stack = nullptr;

struct lookup_call {
  std::uintptr_t pc;
  std::string* file;
  int* line;
  bool ok;
};

void lookup_entry(void* arg) {
  auto* c = static_cast<lookup_call*>(arg);
  // Nothing may unwind out of here: goro_on_gstack's frame describes a
  // goroutine's saved context, not this stack.
  try {
    c->ok = lookup(c->pc, c->file, c->line);
  } catch (...) {
    c->ok = false;
  }
}

}  // namespace

bool dwarf_line(std::uintptr_t pc, std::string* file, int* line) {
  if (!dwarf_lines_available()) return false;
  if (lookup_stack == nullptr) {
    void* p =
        mmap(nullptr, lookup_stack_size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return false;
    mprotect(p, 4096, PROT_NONE);
    lookup_stack = p;
  }
  lookup_call c{pc, file, line, false};
  // goro_on_gstack treats the 64 bytes at sp as a saved context: zeros
  // (a null return address ends any unwinding there).
  void* sp = static_cast<char*>(lookup_stack) + lookup_stack_size - 64;
  goro_on_gstack(sp, lookup_entry, &c);
  return c.ok;
}

#else  // !GORO_HAVE_LIBDW

bool dwarf_lines_available() { return false; }

bool dwarf_line(std::uintptr_t, std::string*, int*) { return false; }

#endif

}  // namespace goro::rt
