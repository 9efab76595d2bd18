// stack.cpp: goroutine stacks: the default size and guard mechanism
// (options, GORO_STACK_SIZE, GORO_STACK_GUARD), the G slab allocator, stack
// mappings and their guard pages. Idle stacks are scavenged in
// mgcscavenge.cpp; overflows are reported by signal_unix.cpp.
#include "runtime/stack.hpp"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>

#include "runtime/envparse.hpp"
#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/san.hpp"
#ifdef GORO_HAVE_ASAN
#include <sanitizer/lsan_interface.h>
#endif
#include "runtime/panic.hpp"
#include "runtime/sched.hpp"
#include "runtime/stackshrink.hpp"

namespace goro::rt {

namespace {

#ifndef MADV_GUARD_INSTALL
constexpr int MADV_GUARD_INSTALL = 102;
#endif

std::size_t stack_bytes = default_stack_reservation;  // guard page included
guard_kind guard_mode = guard_kind::madvise;
// Stacks that may still get an mprotect guard. Each one costs two VMAs
// (guard + stack) against vm.max_map_count; past the budget stacks fall
// back to canaries instead of failing to map.
std::atomic<std::int64_t> mprotect_budget{0};
constexpr std::uint64_t canary_value = 0x6b636174735f6f67ULL;  // "go_stack"

// GORO_STACK_GUARD, read by stackinit; madvise guards work on this kernel.
guard_kind env_guard = guard_kind::none;
bool env_guard_set = false;
bool madvise_ok = false;

#ifndef MADV_POPULATE_WRITE
constexpr int MADV_POPULATE_WRITE = 23;
#endif

// Default-size stacks are carved from chunks of stacks: one mmap per chunk
// instead of one per goroutine. The first chunk holds first_chunk_stacks
// stacks and each next one twice as many, up to max_chunk_stacks (and
// 64 MiB), so a small program maps and populates little.
constexpr std::size_t first_chunk_stacks = 8;
constexpr std::size_t max_chunk_stacks = 64;
std::size_t chunk_stacks_max = max_chunk_stacks;
std::size_t chunk_stacks = first_chunk_stacks;  // size of the next chunk
mutex chunk_lock{lock_rank::stack};
char* chunk_next = nullptr;
std::size_t chunk_left = 0;
bool chunk_guarded = false;  // guards of the current chunk already installed
int self_pidfd = -2;         // for process_madvise; -1: unavailable

int pidfd_self() {
  if (self_pidfd == -2) {
    self_pidfd = int(syscall(SYS_pidfd_open, getpid(), 0));
    if (self_pidfd < 0) self_pidfd = -1;
  }
  return self_pidfd;
}

// One process_madvise call over `n` ranges of `len` bytes, `stride` apart
// from `first`. True if the kernel applied `advice` to all of them.
bool madvise_strided(char* first, std::size_t stride, std::size_t n,
                     std::size_t len, int advice) {
  if (pidfd_self() < 0) return false;
  struct iovec iov[max_chunk_stacks];
  for (std::size_t i = 0; i < n; i++) {
    iov[i].iov_base = first + i * stride;
    iov[i].iov_len = len;
  }
  long r = syscall(SYS_process_madvise, self_pidfd, iov, n, advice, 0);
  return r == long(n * len);
}

// Installs the guard pages of a whole chunk with one process_madvise call
// (Linux accepts MADV_GUARD_INSTALL there) instead of one madvise per
// stack. False if the kernel refuses; then guards go in one by one.
bool install_chunk_guards(char* base, std::size_t n) {
  if (guard_mode != guard_kind::madvise) return false;
  return madvise_strided(base, stack_bytes, n, guard_size, MADV_GUARD_INSTALL);
}

// Commits the top page of every stack of a fresh chunk, the one page a
// goroutine touches unless it goes deeper: one system call for the chunk
// instead of one page fault per goroutine. On this project's VMs a fault
// on a fresh page costs ~12 us and a populated page ~1 us plus ~4 us at
// its first touch (the hypervisor still maps it then): bench/README.md,
// "Page costs". Best effort: without process_madvise (Linux < 5.10) or
// MADV_POPULATE_WRITE (< 5.14) the pages fault in as before.
void populate_chunk_tops(char* base, std::size_t n) {
  if (!madvise_strided(base + stack_bytes - page_size, stack_bytes, n,
                       page_size, MADV_POPULATE_WRITE)) {
    self_pidfd = -1;  // not again: fault them in one by one
  }
}

std::size_t round_up(std::size_t n, std::size_t a) {
  return (n + a - 1) / a * a;
}

std::int64_t read_max_map_count() {
  std::int64_t v = 65530;
  if (FILE* f = std::fopen("/proc/sys/vm/max_map_count", "r")) {
    long long x;
    if (std::fscanf(f, "%lld", &x) == 1) v = x;
    std::fclose(f);
  }
  return v;
}

bool madvise_guard_works() {
  void* p = mmap(nullptr, 2 * page_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return false;
  bool ok = madvise(p, page_size, MADV_GUARD_INSTALL) == 0;
  munmap(p, 2 * page_size);
  return ok;
}

void write_canary(const stack& s) {
  auto* lo = reinterpret_cast<std::uint64_t*>(s.map_base);
  auto* hi = reinterpret_cast<std::uint64_t*>(s.lo) - 1;
  *lo = canary_value;
  *hi = canary_value;
}

// Protects the guard page of a fresh stack with the best mechanism left.
void install_guard(stack& s) {
  if (guard_mode == guard_kind::madvise) {
    if (madvise(s.map_base, guard_size, MADV_GUARD_INSTALL) == 0) {
      s.guard = guard_kind::madvise;
      return;
    }
  }
  if (guard_mode != guard_kind::canary &&
      mprotect_budget.fetch_sub(1, std::memory_order_relaxed) > 0) {
    if (mprotect(s.map_base, guard_size, PROT_NONE) == 0) {
      s.guard = guard_kind::mprotect;
      return;
    }
  }
  s.guard = guard_kind::canary;
  write_canary(s);
}

// Gs are allocated densely from slabs (never freed, like Go's allgs) so
// that walking run queues and free lists touches few pages; a G carries
// its goroutine's callable, and only the goroutine's frames live on its
// stack, which it gets when it first runs (stack_bind in newproc.cpp).
[[noreturn]] void out_of_memory(std::size_t size);

// goro::debug::read_mem_stats: stacks handed out and not unmapped, their
// bytes, Gs allocated. Relaxed counters: statistics only.
std::atomic<std::uint64_t> nstacks{0};
std::atomic<std::uint64_t> nstack_bytes{0};
std::atomic<std::uint64_t> ngs{0};

// G slabs: mappings of gslab_size bytes, committed gslab_populate bytes
// (128 Gs) at a time.
constexpr std::size_t gslab_size = 256 * 1024;
constexpr std::size_t gslab_populate = 32 * 1024;
static_assert(gslab_size % gslab_populate == 0);
mutex gslab_lock{lock_rank::gslab};
char* gslab_next = nullptr;
char* gslab_committed = nullptr;  // end of the populated part of the slab
std::size_t gslab_left = 0;
g_list gnostack;  // Gs whose stack was freed (Go's gFree.noStack)

G* gnew() {
  constexpr std::size_t gsize = (sizeof(G) + 63) & ~std::size_t(63);
  if (gslab_left < gsize) {
    void* p = mmap(nullptr, gslab_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) out_of_memory(gslab_size);
    gslab_next = static_cast<char*>(p);
    gslab_committed = gslab_next;
    gslab_left = gslab_size;
#ifdef GORO_HAVE_ASAN
    // Gs point to heap objects (sleep timers, large callables);
    // LeakSanitizer does not scan mmap'd memory unless told to.
    __lsan_register_root_region(p, gslab_size);
#endif
  }
  // Entering a new stretch of the slab: commit it with one system call
  // rather than one page fault per 16 Gs (see populate_chunk_tops).
  static_assert(gsize <= gslab_populate);
  if (gslab_next + gsize > gslab_committed) {
    madvise(gslab_committed, gslab_populate, MADV_POPULATE_WRITE);
    gslab_committed += gslab_populate;
  }
  G* gp = ::new (gslab_next) G;
  ngs.fetch_add(1, std::memory_order_relaxed);
  gslab_next += gsize;
  gslab_left -= gsize;
  allgadd(gp);
  return gp;
}

stack make_stack(char* base, std::size_t size, bool chunked, bool guarded) {
  nstacks.fetch_add(1, std::memory_order_relaxed);
  nstack_bytes.fetch_add(size, std::memory_order_relaxed);
  stack s;
  s.map_base = base;
  s.lo = reinterpret_cast<std::uintptr_t>(base + guard_size);
  s.hi = reinterpret_cast<std::uintptr_t>(base + size);
  s.chunked = chunked;
  if (guarded)
    s.guard = guard_kind::madvise;
  else
    install_guard(s);
  return s;
}

[[noreturn]] void out_of_memory(std::size_t size) {
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "runtime: cannot reserve %zu bytes for a goroutine stack (%s)",
                size, std::strerror(errno));
  fatal(buf);
}

}  // namespace

const char* guard_name(guard_kind k) {
  switch (k) {
    case guard_kind::madvise:
      return "madvise";
    case guard_kind::mprotect:
      return "mprotect";
    case guard_kind::canary:
      return "canary";
    case guard_kind::none:
      break;
  }
  return "none";
}

bool parse_stack_size(const char* s, std::size_t* bytes, bool* too_large) {
  if (too_large != nullptr) *too_large = false;
  if (s == nullptr) return false;
  std::uint64_t v = 0;
  num_parse r = parse_digits(&s, &v);
  if (r == num_parse::not_number) return false;
  int shift = 0;
  switch (*s) {
    case 0:
      break;
    case 'k':
    case 'K':
      shift = 10;
      break;
    case 'm':
    case 'M':
      shift = 20;
      break;
    case 'g':
    case 'G':
      shift = 30;
      break;
    default:
      return false;
  }
  if (shift != 0 && *++s != 0) return false;  // one suffix, at the end
  std::uint64_t b = 0;
  if (r == num_parse::too_large ||
      !mul_within(v, std::uint64_t(1) << shift, SIZE_MAX, &b)) {
    if (too_large != nullptr) *too_large = true;  // a size, but too large
    return false;
  }
  *bytes = std::size_t(b);
  return true;
}

static_assert(min_stack_size == 16 * 1024 && max_stack_size == 1u << 30,
              "update stack_size_problem's messages");
const char* stack_size_problem(std::size_t bytes) {
  if (bytes < min_stack_size) return "below the 16k (16 KiB) minimum";
  if (bytes > max_stack_size) return "above the 1g (1 GiB) maximum";
  return nullptr;
}

bool parse_stack_guard(const char* s, guard_kind* kind) {
  static constexpr struct {
    const char* name;
    guard_kind kind;
  } names[] = {{"auto", guard_kind::none},
               {"madvise", guard_kind::madvise},
               {"mprotect", guard_kind::mprotect},
               {"canary", guard_kind::canary}};
  for (const auto& n : names)
    if (s != nullptr && std::strcmp(s, n.name) == 0) {
      *kind = n.kind;
      return true;
    }
  return false;
}

void stackinit(std::size_t requested_size, int requested_guard) {
  std::size_t size = requested_size;
  if (size == 0) {
    size = default_stack_reservation;
    if (const char* e = std::getenv("GORO_STACK_SIZE")) {
      if (*e == 0)
        fatalf("GORO_STACK_SIZE=: empty (unset it for the default, %zuk)",
               default_stack_reservation / 1024);
      bool too_large = false;
      if (!parse_stack_size(e, &size, &too_large)) {
        if (too_large)
          fatalf("GORO_STACK_SIZE=%s: %s", e,
                 stack_size_problem(max_stack_size + 1));
        fatalf(
            "GORO_STACK_SIZE=%s: not a size (want bytes, or a number with a "
            "k, m or g suffix for KiB, MiB or GiB, e.g. 1m)",
            e);
      }
      if (const char* why = stack_size_problem(size))
        fatalf("GORO_STACK_SIZE=%s: %s", e, why);
    }
  }
  stack_bytes = round_up(size, page_size);
  // Default-size stacks come in chunks of up to 64 stacks and 64 MiB.
  chunk_stacks_max = std::max<std::size_t>(
      1, std::min(max_chunk_stacks, (std::size_t(64) << 20) / stack_bytes));
  chunk_stacks = std::min(first_chunk_stacks, chunk_stacks_max);

  if (const char* e = std::getenv("GORO_STACK_GUARD")) {
    if (!parse_stack_guard(e, &env_guard))
      fatalf("GORO_STACK_GUARD=%s: want auto, madvise, mprotect or canary", e);
    env_guard_set = true;
  }
  madvise_ok = madvise_guard_works();
  guard_mode = resolve_guard(requested_guard);
  mprotect_budget.store(read_max_map_count() / 4);
}

guard_kind resolve_guard(int requested) {
  // GORO_STACK_GUARD overrides the options.
  guard_kind want = env_guard_set ? env_guard : guard_kind(requested);
  if (want == guard_kind::none || want == guard_kind::madvise)
    want = madvise_ok ? guard_kind::madvise : guard_kind::mprotect;
  return want;
}

guard_kind default_guard() { return guard_mode; }

std::size_t default_stack_size() { return stack_bytes; }

G* galloc() {
  lock_guard lk(gslab_lock);
  if (G* gp = gnostack.pop()) return gp;
  return gnew();
}

void gnostack_refill(g_list* dst, std::int32_t n) {
  lock_guard lk(gslab_lock);
  while (dst->size < n) {
    G* gp = gnostack.pop();
    if (gp == nullptr) gp = gnew();
    dst->push(gp);
  }
}

void gnostack_put(G* gp) {
  lock_guard lk(gslab_lock);
  gnostack.push(gp);
}

void gnostack_spill(g_list* src, std::int32_t keep) {
  lock_guard lk(gslab_lock);
  while (src->size > keep) gnostack.push(src->pop());
}

stack stackalloc() {
  char* base;
  bool guarded;
  {
    lock_guard lk(chunk_lock);
    if (chunk_left == 0) {
      std::size_t n = chunk_stacks;
      std::size_t bytes = stack_bytes * n;
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) out_of_memory(bytes);
      chunk_next = static_cast<char*>(p);
      chunk_left = n;
      // Never transparent huge pages: with THP "always", one touched top
      // page could bring in 2 MiB, 32 stacks' worth.
      madvise(p, bytes, MADV_NOHUGEPAGE);
      chunk_guarded = install_chunk_guards(chunk_next, n);
      populate_chunk_tops(chunk_next, n);
      stackshrink_chunk(chunk_next, n, stack_bytes, chunk_guarded);
      stackshrink_carving(chunk_next);
      chunk_stacks = std::min(2 * n, chunk_stacks_max);
    }
    base = chunk_next;
    guarded = chunk_guarded;
    chunk_next += stack_bytes;
    chunk_left--;
  }
  return make_stack(base, stack_bytes, true, guarded);
}

void stack_guards_reinstall(char* base, std::size_t n) {
  if (install_chunk_guards(base, n)) return;
  for (std::size_t i = 0; i < n; i++)
    if (madvise(base + i * stack_bytes, guard_size, MADV_GUARD_INSTALL) != 0)
      fatalf("runtime: cannot put a stack guard page back: %s",
             std::strerror(errno));
}

G* malg(std::size_t size) {
  if (size == 0) size = stack_bytes;
  if (size < min_stack_size) size = min_stack_size;
  if (size > SIZE_MAX - page_size) out_of_memory(size);
  size = round_up(size, page_size);
  stack s;
  if (size == stack_bytes) {
    s = stackalloc();
  } else {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) out_of_memory(size);
    s = make_stack(static_cast<char*>(p), size, false, false);
  }
  G* gp = galloc();
  gp->stk = s;
  return gp;
}

void stackfree(G* gp) {
  if (gp->stk.guard == guard_kind::mprotect)
    mprotect_budget.fetch_add(1, std::memory_order_relaxed);
  munmap(gp->stk.map_base, gp->stk.map_size());
  nstacks.fetch_sub(1, std::memory_order_relaxed);
  nstack_bytes.fetch_sub(gp->stk.map_size(), std::memory_order_relaxed);
  gp->stk = stack{};
  gnostack_put(gp);
}

stack_counts read_stack_counts() {
  return {nstacks.load(std::memory_order_relaxed),
          nstack_bytes.load(std::memory_order_relaxed),
          ngs.load(std::memory_order_relaxed)};
}

void stack_check_canary(G* gp) {
  auto* lo = reinterpret_cast<std::uint64_t*>(gp->stk.map_base);
  auto* hi = reinterpret_cast<std::uint64_t*>(gp->stk.lo) - 1;
  if (*lo != canary_value || *hi != canary_value) {
    std::uintptr_t sp =
        reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
    report_stack_overflow(gp, sp);
  }
}

}  // namespace goro::rt
