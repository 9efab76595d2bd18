// asyncsafepoint.cpp: which code a preemption signal may interrupt (Go's
// isAsyncSafePoint, here by PC range only; ../shared/reference/
// preemption.md §4), and the goro::debug calls that add code to it.
//
// Preemptible: the main executable's code (PT_LOAD segments with PF_X,
// from dl_iterate_phdr) minus goro's own code (section goro_text, see
// cmake/goro_text.cmake) and the PLT (.plt, .plt.sec, .plt.got, .iplt,
// read from the ELF section headers), plus what the user adds with
// add_async_preempt_library / add_async_preempt_range. Never system
// libraries (libc, libstdc++, the loader, sanitizers) or goro itself.
//
// Invariants: ranges are only appended, under install_mu, each written
// before nranges is raised (release); the handler reads nranges with
// acquire and never sees a half-written entry. pc_preemptible is
// async-signal-safe (no lock, no allocation); the rest runs in ordinary
// context.
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/asyncpreempt_internal.hpp"
#include "runtime/proc.hpp"

// goro's own code when the static library is linked into the executable:
// the build renames every code section of libgoro.a to goro_text
// (cmake/goro_text.cmake) and the linker defines these. Null in the
// shared library, whose code is outside the executable anyway.
extern "C" {
extern char __start_goro_text[] __attribute__((weak, visibility("hidden")));
extern char __stop_goro_text[] __attribute__((weak, visibility("hidden")));
}

namespace goro::rt {

namespace {

struct pc_range {
  std::uintptr_t lo, hi;
};
constexpr int max_ranges = 64;
// Preemptible code. Entries are only appended (under install_mu), each
// written before nranges is raised (release), so the handler, which reads
// nranges with acquire, never sees a half-written one.
pc_range ranges[max_ranges];
std::atomic<int> nranges{0};

// Removes [lo, hi) from the preemptible ranges.
void exclude(std::vector<pc_range>& v, std::uintptr_t lo, std::uintptr_t hi) {
  if (lo >= hi) return;
  std::vector<pc_range> out;
  for (pc_range r : v) {
    if (hi <= r.lo || lo >= r.hi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < lo) out.push_back({r.lo, lo});
    if (hi < r.hi) out.push_back({hi, r.hi});
  }
  v.swap(out);
}

// A loaded object's executable segments: the main program (want == 0, the
// first object dl_iterate_phdr reports) or the one containing address
// `want`.
struct exe_info {
  std::uintptr_t want = 0;
  std::uintptr_t bias = 0;
  std::vector<pc_range> text;
  std::string name;
  bool found = false;
};

int phdr_cb(dl_phdr_info* info, std::size_t, void* data) {
  auto* e = static_cast<exe_info*>(data);
  std::vector<pc_range> text;
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    std::uintptr_t hi = lo + ph.p_memsz;
    if (e->want >= lo && e->want < hi) contains = true;
    if (ph.p_flags & PF_X) text.push_back({lo, hi});
  }
  if (e->want != 0 && !contains) return 0;
  e->bias = info->dlpi_addr;
  e->text = std::move(text);
  e->name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  e->found = true;
  return 1;
}

// An object's PLT sections (.plt, .plt.sec, .plt.got), from its section
// headers.
void exclude_plt(std::vector<pc_range>& v, std::uintptr_t bias,
                 const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ElfW(Ehdr) eh;
  std::vector<ElfW(Shdr)> sh;
  std::vector<char> names;
  if (pread(fd, &eh, sizeof eh, 0) != ssize_t(sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shstrndx >= eh.e_shnum)
    goto out;
  sh.resize(eh.e_shnum);
  if (pread(fd, sh.data(), sh.size() * sizeof(ElfW(Shdr)), off_t(eh.e_shoff)) !=
      ssize_t(sh.size() * sizeof(ElfW(Shdr))))
    goto out;
  names.resize(sh[eh.e_shstrndx].sh_size + 1);
  if (pread(fd, names.data(), names.size() - 1,
            off_t(sh[eh.e_shstrndx].sh_offset)) != ssize_t(names.size() - 1))
    goto out;
  for (const ElfW(Shdr) & s : sh) {
    if (s.sh_name >= names.size() - 1) continue;
    const char* n = names.data() + s.sh_name;
    if (std::strcmp(n, ".plt") == 0 || std::strcmp(n, ".plt.sec") == 0 ||
        std::strcmp(n, ".plt.got") == 0 || std::strcmp(n, ".iplt") == 0)
      exclude(v, bias + s.sh_addr, bias + s.sh_addr + s.sh_size);
  }
out:
  close(fd);
}

bool in_goro(std::uintptr_t lo, std::uintptr_t hi) {
  auto inside = [&](const void* p) {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= lo && a < hi;
  };
  return inside(reinterpret_cast<const void*>(&goro_async_resume)) ||
         inside(reinterpret_cast<const void*>(&asyncpreempt_set));
}

// Appends v (minus goro's own code) to the preemptible ranges; false if
// they do not fit or would cover goro's code. Caller holds install_mu.
bool add_ranges_locked(std::vector<pc_range> v) {
  if (__start_goro_text != nullptr && __stop_goro_text != nullptr)
    exclude(v, reinterpret_cast<std::uintptr_t>(__start_goro_text),
            reinterpret_cast<std::uintptr_t>(__stop_goro_text));
  int n = nranges.load(std::memory_order_relaxed);
  if (n + int(v.size()) > max_ranges) return false;
  for (pc_range r : v)
    if (in_goro(r.lo, r.hi)) return false;
  for (std::size_t i = 0; i < v.size(); i++) ranges[n + int(i)] = v[i];
  nranges.store(n + int(v.size()), std::memory_order_release);
  return true;
}

}  // namespace

bool pc_preemptible(std::uintptr_t pc) {
  int n = nranges.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (pc >= ranges[i].lo && pc < ranges[i].hi) return true;
  return false;
}

// The main executable's code, unless GORO_DEBUG=asyncpreemptmain=0 limits
// preemption to code added explicitly; false if goro's own code cannot be
// told apart from the executable's (then async preemption stays off).
bool compute_ranges() {
  if (debug.asyncpreemptmain == 0) return true;
  exe_info e;
  dl_iterate_phdr(phdr_cb, &e);
  if (!e.found) return false;
  std::vector<pc_range> v = e.text;
  exclude_plt(v, e.bias, "/proc/self/exe");
  // goro's code must be outside (the shared library, or the static one
  // with its goro_text section); otherwise refuse.
  return add_ranges_locked(std::move(v));
}

namespace {
// goro's own code (async-signal-safe reads, as for ranges): the goro_text
// section of the static library, or the shared library's executable
// segments. Written once under install_mu before the handler is installed.
pc_range goro_code[4];
int ngoro_code = 0;
}  // namespace

void compute_goro_code() {
  if (ngoro_code != 0) return;
  if (__start_goro_text != nullptr && __stop_goro_text != nullptr) {
    goro_code[0] = {reinterpret_cast<std::uintptr_t>(__start_goro_text),
                    reinterpret_cast<std::uintptr_t>(__stop_goro_text)};
    ngoro_code = 1;
    return;
  }
  exe_info e;
  e.want = reinterpret_cast<std::uintptr_t>(&goro_async_resume);
  dl_iterate_phdr(phdr_cb, &e);
  if (!e.found) return;
  for (pc_range r : e.text)
    if (ngoro_code < 4) goro_code[ngoro_code++] = r;
}

bool pc_in_goro(std::uintptr_t pc) {
  for (int i = 0; i < ngoro_code; i++)
    if (pc >= goro_code[i].lo && pc < goro_code[i].hi) return true;
  return false;
}

}  // namespace goro::rt

namespace goro::debug {

namespace {
// Objects whose code is never made preemptible: their state is shared by
// every goroutine on a thread (malloc arenas, stdio, the loader, the
// unwinder, a sanitizer's runtime), so a goroutine interrupted inside them
// could block or corrupt the next one.
bool system_object(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  for (const char* n :
       {"libc.so", "libc-", "ld-linux", "libstdc++", "libgcc_s", "libm.so",
        "libpthread", "libdl.so", "librt.so", "linux-vdso", "libgoro",
        "libasan", "libtsan", "libubsan", "liblsan", "libhwasan"})
    if (base.rfind(n, 0) == 0) return true;
  return false;
}
}  // namespace

void add_async_preempt_library(const void* addr) {
  goro::detail::ensure_started(nullptr);
  rt::exe_info e;
  e.want = reinterpret_cast<std::uintptr_t>(addr);
  if (e.want == 0)
    throw std::invalid_argument("goro::debug::add_async_preempt_library: null");
  dl_iterate_phdr(rt::phdr_cb, &e);
  if (!e.found)
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_library: the address is in no "
        "loaded object");
  std::string path = e.name.empty() ? "/proc/self/exe" : e.name;
  if (!e.name.empty() && system_object(e.name))
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_library: " + e.name +
        " is a system library (or goro) whose code must not be interrupted");
  std::vector<rt::pc_range> v = e.text;
  rt::exclude_plt(v, e.bias, path.c_str());
  std::lock_guard<std::mutex> lk(rt::install_mu);
  if (!rt::add_ranges_locked(std::move(v)))
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_library: " + path +
        ": too many code ranges, or goro's own code");
}

void add_async_preempt_range(const void* begin, const void* end) {
  goro::detail::ensure_started(nullptr);
  auto lo = reinterpret_cast<std::uintptr_t>(begin);
  auto hi = reinterpret_cast<std::uintptr_t>(end);
  if (lo == 0 || hi <= lo)
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_range: empty or null range");
  std::lock_guard<std::mutex> lk(rt::install_mu);
  if (!rt::add_ranges_locked({rt::pc_range{lo, hi}}))
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_range: too many ranges, or the "
        "range covers goro's own code");
}

}  // namespace goro::debug
