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
#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

extern "C" void goro_on_gstack(void* sp, void (*fn)(void*), void* arg);
#endif

#include <cxxabi.h>

#include <cstdlib>
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
  // Inline chains (dwarf_frames).
  decltype(&::dwfl_module_addrdie) addrdie;
  decltype(&::dwarf_getscopes) getscopes;
  decltype(&::dwarf_getscopes_die) getscopes_die;
  decltype(&::dwarf_child) child;
  decltype(&::dwarf_siblingof) siblingof;
  decltype(&::dwarf_haspc) haspc;
  decltype(&::dwarf_tag) tag;
  decltype(&::dwarf_attr) attr;
  decltype(&::dwarf_attr_integrate) attr_integrate;
  decltype(&::dwarf_formref_die) formref_die;
  decltype(&::dwarf_formstring) formstring;
  decltype(&::dwarf_formudata) formudata;
  decltype(&::dwarf_diename) diename;
  decltype(&::dwarf_getsrcfiles) getsrcfiles;
  decltype(&::dwarf_filesrc) filesrc;
  decltype(&::dwarf_decl_file) decl_file;
  decltype(&::dwarf_decl_line) decl_line;
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
            sym(h, "dwfl_standard_find_debuginfo", &api.find_debuginfo) &&
            sym(h, "dwfl_module_addrdie", &api.addrdie) &&
            sym(h, "dwarf_getscopes", &api.getscopes) &&
            sym(h, "dwarf_getscopes_die", &api.getscopes_die) &&
            sym(h, "dwarf_child", &api.child) &&
            sym(h, "dwarf_siblingof", &api.siblingof) &&
            sym(h, "dwarf_haspc", &api.haspc) &&
            sym(h, "dwarf_tag", &api.tag) && sym(h, "dwarf_attr", &api.attr) &&
            sym(h, "dwarf_attr_integrate", &api.attr_integrate) &&
            sym(h, "dwarf_formref_die", &api.formref_die) &&
            sym(h, "dwarf_formstring", &api.formstring) &&
            sym(h, "dwarf_formudata", &api.formudata) &&
            sym(h, "dwarf_diename", &api.diename) &&
            sym(h, "dwarf_getsrcfiles", &api.getsrcfiles) &&
            sym(h, "dwarf_filesrc", &api.filesrc) &&
            sym(h, "dwarf_decl_file", &api.decl_file) &&
            sym(h, "dwarf_decl_line", &api.decl_line);
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

// A source path as Go prints it: builds that pass relative paths
// (ccache's base_dir) record "../../src/x.cpp" relative to the
// compilation directory: the full path, clean.
std::string full_path(const char* src, const char* comp_dir) {
  std::string path;
  if (src[0] != '/' && comp_dir != nullptr && comp_dir[0] == '/') {
    path = comp_dir;
    path += '/';
  }
  path += src;
  return path.find("/.") != std::string::npos
             ? std::filesystem::path(path).lexically_normal().string()
             : path;
}

bool session_ready() {
  if (session == nullptr || current_adds() != reported_adds) return report();
  return true;
}

// The lookup itself, on lookup_stack.
bool lookup(std::uintptr_t pc, std::string* file, int* line) {
  if (!session_ready()) return false;
  Dwfl_Module* mod = api.addrmodule(session, pc);
  if (mod == nullptr) return false;
  Dwfl_Line* l = api.getsrc(mod, pc);
  if (l == nullptr) return false;
  int lineno = 0;
  const char* src =
      api.lineinfo(l, nullptr, &lineno, nullptr, nullptr, nullptr);
  if (src == nullptr || lineno <= 0) return false;
  *file = full_path(src, src[0] != '/' ? api.comp_dir(l) : nullptr);
  *line = lineno;
  return true;
}

// The DIE that declares a function: through DW_AT_abstract_origin (an
// inlined or out-of-line instance) and DW_AT_specification (a definition
// outside its class).
Dwarf_Die declaration(Dwarf_Die die) {
  Dwarf_Attribute a;
  Dwarf_Die next;
  for (int i = 0; i < 4; i++) {
    if ((api.attr(&die, DW_AT_abstract_origin, &a) == nullptr &&
         api.attr(&die, DW_AT_specification, &a) == nullptr) ||
        api.formref_die(&a, &next) == nullptr)
      break;
    die = next;
  }
  return die;
}

std::string demangled(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  if (d == nullptr) return mangled;
  std::string out(d);
  std::free(d);
  return out;
}

// The function a scope DIE (a subprogram or an inlined instance) belongs
// to, as the demangler prints it: its linkage name demangled, else its
// plain name qualified by the scopes that declare it (GCC gives inlined
// template instances and lambdas' call operators no linkage name). An
// unnamed class is a lambda's: "{lambda()#0}", as the demangler would
// print it (funcname.cpp then names it by its line).
std::string scope_function(Dwarf_Die* die, int depth = 0) {
  Dwarf_Attribute a;
  for (unsigned at :
       {unsigned(DW_AT_linkage_name), unsigned(DW_AT_MIPS_linkage_name)}) {
    if (api.attr_integrate(die, at, &a) != nullptr) {
      const char* s = api.formstring(&a);
      if (s != nullptr) return demangled(s);
    }
  }
  const char* n = api.diename(die);
  std::string name = n != nullptr ? n : "?";
  if (depth > 8) return name;
  Dwarf_Die decl = declaration(*die);
  Dwarf_Die* up = nullptr;
  int k = api.getscopes_die(&decl, &up);
  std::string prefix;  // built from the innermost scope out
  for (int i = 1; i < k; i++) {
    int tag = api.tag(&up[i]);
    const char* un = api.diename(&up[i]);
    std::string part;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) {
      part = scope_function(&up[i], depth + 1);
    } else if (tag == DW_TAG_namespace) {
      part = un != nullptr ? un : "(anonymous namespace)";
    } else if (tag == DW_TAG_class_type || tag == DW_TAG_structure_type ||
               tag == DW_TAG_union_type) {
      part = un != nullptr ? un : "{lambda()#0}";
    } else {
      continue;  // lexical blocks, the compilation unit
    }
    prefix = prefix.empty() ? part : part + "::" + prefix;
    if (tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine) break;
  }
  std::free(up);
  return prefix.empty() ? name : prefix + "::" + name;
}

// Where a function is declared; for a lambda's call operator, which GCC
// gives no position of its own, where its class (the lambda) is.
void decl_of(Dwarf_Die* die, const char* comp_dir, std::string* file,
             int* line) {
  Dwarf_Die d = *die;
  Dwarf_Die* up = nullptr;
  if (api.decl_line(&d, line) != 0 || *line <= 0) {
    Dwarf_Die decl = declaration(*die);
    int k = api.getscopes_die(&decl, &up);
    if (k < 2 || api.diename(&up[1]) != nullptr ||
        api.decl_line(&up[1], line) != 0) {
      std::free(up);
      *line = 0;
      return;
    }
    d = up[1];
  }
  if (const char* df = api.decl_file(&d)) *file = full_path(df, comp_dir);
  std::free(up);
}

// The innermost function scope (subprogram or inlined instance) under
// parent that contains pc, searched depth first: dwarf_getscopes looks
// into a function's DIE only if pc is in its range, but GCC nests the
// out-of-line copy of a lambda's call operator inside the DIE of the
// function that declares the lambda.
bool find_scope(Dwarf_Die* parent, Dwarf_Addr pc, Dwarf_Die* found, int depth) {
  Dwarf_Die c;
  if (depth > 32 || api.child(parent, &c) != 0) return false;
  do {
    int tag = api.tag(&c);
    bool fn = tag == DW_TAG_subprogram || tag == DW_TAG_inlined_subroutine;
    if ((fn || tag == DW_TAG_lexical_block) && api.haspc(&c, pc) == 1) {
      if (fn) *found = c;
      find_scope(&c, pc, found, depth + 1);  // what is inlined in it
      return true;
    }
    if ((fn || tag == DW_TAG_namespace || tag == DW_TAG_class_type ||
         tag == DW_TAG_structure_type || tag == DW_TAG_lexical_block) &&
        find_scope(&c, pc, found, depth + 1))
      return true;
  } while (api.siblingof(&c, &c) == 0);
  return false;
}

// The inline chain at pc: the line table gives the position in the
// innermost inlined function; each DW_TAG_inlined_subroutine scope, from
// the innermost out, names that function and, with DW_AT_call_file and
// DW_AT_call_line, the position of its call in the scope around it, up to
// the DW_TAG_subprogram of the machine-code function.
bool frames_lookup(std::uintptr_t pc, std::vector<dwarf_frame>* out) {
  std::string file;
  int line = 0;
  if (!lookup(pc, &file, &line)) return false;
  Dwfl_Module* mod = api.addrmodule(session, pc);
  Dwarf_Addr bias = 0;
  Dwarf_Die* cu = mod != nullptr ? api.addrdie(mod, pc, &bias) : nullptr;
  if (cu == nullptr) return false;
  Dwarf_Die* scopes = nullptr;
  int n = api.getscopes(cu, pc - bias, &scopes);
  if (n <= 0) {
    std::free(scopes);
    scopes = static_cast<Dwarf_Die*>(std::malloc(sizeof(Dwarf_Die)));
    if (scopes == nullptr || !find_scope(cu, pc - bias, scopes, 0)) {
      std::free(scopes);
      return false;
    }
    n = 1;
  }
  // scopes[0.. ] follows an inlined instance into its abstract origin's
  // scopes (the inlined function's own namespace): the innermost function
  // scope is right, and dwarf_getscopes_die gives the DIEs that really
  // contain it (the functions it was inlined into).
  int inner = 0;
  while (inner < n && api.tag(&scopes[inner]) != DW_TAG_inlined_subroutine &&
         api.tag(&scopes[inner]) != DW_TAG_subprogram)
    inner++;
  Dwarf_Die* chain = nullptr;
  int m = inner < n ? api.getscopes_die(&scopes[inner], &chain) : 0;
  std::free(scopes);
  if (m <= 0) {
    std::free(chain);
    return false;
  }
  scopes = chain;
  n = m;
  Dwarf_Attribute a;
  const char* comp_dir = nullptr;
  if (api.attr(cu, DW_AT_comp_dir, &a) != nullptr)
    comp_dir = api.formstring(&a);
  Dwarf_Files* files = nullptr;
  std::size_t nfiles = 0;
  if (api.getsrcfiles(cu, &files, &nfiles) != 0) files = nullptr;
  for (int i = 0; i < n; i++) {
    int tag = api.tag(&scopes[i]);
    if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram) continue;
    dwarf_frame f;
    f.function = scope_function(&scopes[i]);
    f.file = file;
    f.line = line;
    decl_of(&scopes[i], comp_dir, &f.decl_file, &f.decl_line);
    out->push_back(std::move(f));
    if (tag == DW_TAG_subprogram) break;
    // Where this instance was inlined: the position in the next scope.
    Dwarf_Word fi = 0, li = 0;
    if (api.attr(&scopes[i], DW_AT_call_file, &a) == nullptr ||
        api.formudata(&a, &fi) != 0 ||
        api.attr(&scopes[i], DW_AT_call_line, &a) == nullptr ||
        api.formudata(&a, &li) != 0 || files == nullptr || fi >= nfiles) {
      file.clear();
      line = 0;
      continue;
    }
    const char* src = api.filesrc(files, fi, nullptr, nullptr);
    file = src != nullptr ? full_path(src, comp_dir) : "";
    line = int(li);
  }
  std::free(scopes);
  return !out->empty();
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
  std::vector<dwarf_frame>* frames;  // set: frames_lookup
  bool ok;
};

void lookup_entry(void* arg) {
  auto* c = static_cast<lookup_call*>(arg);
  // Nothing may unwind out of here: goro_on_gstack's frame describes a
  // goroutine's saved context, not this stack.
  try {
    c->ok = c->frames != nullptr ? frames_lookup(c->pc, c->frames)
                                 : lookup(c->pc, c->file, c->line);
  } catch (...) {
    c->ok = false;
  }
}

bool run_lookup(lookup_call* c) {
  if (!dwarf_lines_available()) return false;
  if (lookup_stack == nullptr) {
    void* p =
        mmap(nullptr, lookup_stack_size, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) return false;
    mprotect(p, 4096, PROT_NONE);
    lookup_stack = p;
  }
  // goro_on_gstack treats the 64 bytes at sp as a saved context: zeros
  // (a null return address ends any unwinding there).
  void* sp = static_cast<char*>(lookup_stack) + lookup_stack_size - 64;
  goro_on_gstack(sp, lookup_entry, c);
  return c->ok;
}

}  // namespace

bool dwarf_line(std::uintptr_t pc, std::string* file, int* line) {
  lookup_call c{pc, file, line, nullptr, false};
  return run_lookup(&c);
}

bool dwarf_frames(std::uintptr_t pc, std::vector<dwarf_frame>* out) {
  out->clear();
  lookup_call c{pc, nullptr, nullptr, out, false};
  if (!run_lookup(&c)) out->clear();
  return !out->empty();
}

#else  // !GORO_HAVE_LIBDW

bool dwarf_lines_available() { return false; }

bool dwarf_line(std::uintptr_t, std::string*, int*) { return false; }

bool dwarf_frames(std::uintptr_t, std::vector<dwarf_frame>*) { return false; }

#endif

}  // namespace goro::rt
