// stack.hpp: goroutine stacks (brief decision 6).
//
// C++ cannot move a stack, so every goroutine reserves virtual memory for
// its whole stack (default 64 KiB) and the kernel commits it page by page.
// Below the usable range sits one guard page protected, in order of
// preference, by madvise(MADV_GUARD_INSTALL) (Linux 6.13+: no VMA split),
// mprotect(PROT_NONE) within a budget of memory mappings (each one splits a
// VMA and vm.max_map_count is finite), or canary words checked at every
// switch. A goroutine gets its stack when it first runs and its first
// frames sit at the top of the mapping, so a goroutine touches one stack
// page unless it goes deeper.
//
// stack.cpp: the default size and guard (GORO_STACK_SIZE, GORO_STACK_GUARD),
// the G slab allocator, stack mappings and guards. mgcscavenge.cpp returns
// idle stacks' memory to the OS; signal_unix.cpp reports overflows.
#pragma once

#include <cstddef>
#include <cstdint>

// minit_signals and install_overflow_handler (the overflow reports) are
// part of the stack machinery for the threads and schedinit that set it up.
#include "runtime/signal_unix.hpp"

namespace goro::rt {

enum class guard_kind : std::uint8_t { none, madvise, mprotect, canary };

struct stack {
  std::uintptr_t lo = 0;     // lowest usable address
  std::uintptr_t hi = 0;     // one past the highest usable address
  char* map_base = nullptr;  // start of the mapping (guard page first)
  guard_kind guard = guard_kind::none;
  bool chunked = false;  // carved from a shared chunk, never unmapped alone
  // Bytes of the mapping, guard page included.
  std::size_t map_size() const {
    return hi - reinterpret_cast<std::uintptr_t>(map_base);
  }
};

struct G;
struct g_list;

constexpr std::size_t page_size = 4096;
constexpr std::size_t guard_size = page_size;
// Bounds of the runtime-wide default stack size (options::stack_size,
// GORO_STACK_SIZE); 1 GiB is about Go's default maximum stack (1 GB).
// Per-goroutine sizes (go_options::stack_size) below the minimum are raised
// to it.
constexpr std::size_t min_stack_size = 16 * 1024;
constexpr std::size_t max_stack_size = std::size_t(1) << 30;
// The default reservation (options::stack_size 0, no GORO_STACK_SIZE),
// guard page included. 64 KiB keeps the page tables of many goroutines
// small: a page-table page maps 2 MiB, so 32 stacks share one (128 bytes
// of page table per goroutine; 256 KiB stacks needed 512 and made waking
// 100k scattered goroutines 7-20x slower: docs/design.md §8). Under the
// sanitizers, whose frames are several times larger, it is 256 KiB.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr std::size_t default_stack_reservation = 256 * 1024;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr std::size_t default_stack_reservation = 256 * 1024;
#else
constexpr std::size_t default_stack_reservation = 64 * 1024;
#endif
#else
constexpr std::size_t default_stack_reservation = 64 * 1024;
#endif

// Parses GORO_STACK_SIZE's syntax: decimal digits and an optional k/K, m/M
// or g/G suffix (KiB, MiB, GiB). Nothing else: no sign, spaces, other
// suffixes, empty string or overflow. Returns false if `s` is malformed,
// or if its value does not fit in a size_t (then *too_large, if given, is
// set: a size, but larger than any maximum).
bool parse_stack_size(const char* s, std::size_t* bytes,
                      bool* too_large = nullptr);
// Why `bytes` cannot be the default stack size (below the minimum, above
// the maximum), or nullptr if it can. Sizes are rounded up to whole pages.
const char* stack_size_problem(std::size_t bytes);
// Parses GORO_STACK_GUARD: auto (none), madvise, mprotect or canary.
bool parse_stack_guard(const char* s, guard_kind* kind);

// Chooses the guard mechanism and the default stack size from options and
// the environment (GORO_STACK_SIZE, GORO_STACK_GUARD). Called once, with a
// requested_size that stack_size_problem accepts (or 0: the environment,
// else default_stack_reservation); a malformed environment variable is a fatal
// error.
void stackinit(std::size_t requested_size, int requested_guard);
// The default stack size in bytes (whole pages, guard page included).
std::size_t default_stack_size();
// The guard mechanism new stacks get (before falling back to canaries once
// the mprotect budget is spent), and the one a request for `requested` (a
// goro::stack_guard value) would have chosen at stackinit: what the runtime
// compares when options reach an already started runtime.
guard_kind default_guard();
guard_kind resolve_guard(int requested);
const char* guard_name(guard_kind k);

// A G without a stack: from the global list of stackless Gs, else new
// from the slab (registered in allgs).
G* galloc();
// Moves stackless Gs between a P's list and the global one (gslab lock,
// once per batch): refill `dst` up to n Gs, or spill `src` down to `keep`.
void gnostack_refill(g_list* dst, std::int32_t n);
void gnostack_spill(g_list* src, std::int32_t keep);
// Puts one stackless G on the global list.
void gnostack_put(G* gp);
// A fresh stack of the default size, carved from a chunk, guard installed.
stack stackalloc();
// Installs again the madvise guard pages of the `n` default-size stacks of
// the chunk at `base` (stackshrink.cpp, after mremap took them away).
void stack_guards_reinstall(char* base, std::size_t n);
// A G with a fresh stack of `size` bytes (0: the default size).
G* malg(std::size_t size);
// Releases the stack of a G that will not be reused (the G dies with it).
void stackfree(G* gp);
// Returns the stack memory of dead Gs idling in the global free list to
// the OS (sysmon calls it; mgcscavenge.cpp). Returns the number of stacks
// released.
std::size_t scavenge_stacks(std::size_t max);
// Stacks reserved now (and their bytes) and Gs ever allocated.
struct stack_counts {
  std::uint64_t stacks = 0;
  std::uint64_t stack_bytes = 0;
  std::uint64_t gs = 0;
};
stack_counts read_stack_counts();
// Checks the canary of a canary-guarded stack; fatal on overflow.
void stack_check_canary(G* gp);

}  // namespace goro::rt
