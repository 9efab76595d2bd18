// stackshrink.cpp: releasing the stack memory of long-parked goroutines and
// restoring it transparently (the role of Go's shrinkstack; see
// stackshrink.hpp and docs/design.md §8, "A stack's life").
//
// The unit of release is a whole chunk of default-size stacks (stack.cpp)
// whose every goroutine has been parked longer than GORO_DEBUG=stackrelease
// ms. Its pages are taken away atomically by one mremap(MREMAP_DONTUNMAP)
// onto a scratch range: from that instant any touch of the chunk faults, and
// because the chunk is registered with userfaultfd (missing mode) the
// faulting thread, in user or kernel mode, waits for the handler thread
// instead of seeing a fresh zero page. One call for 64 stacks matters on
// these VMs: taking a single page away (UFFDIO_MOVE, MADV_DONTNEED) costs
// 25-70 us, a TLB flush per call. The live bytes of each stack (saved
// stack pointer to top) are then copied from the scratch range into a heap
// buffer, the guard pages are put back, and the scratch range is replaced
// by an empty reservation (the pages go back to the OS).
//
// Invariants:
//  - G.stk_saved != 0 only while the G is not running: sysmon claims a G
//    (stack_releasing) and then re-reads its status behind heavy_fence;
//    execute stores the running status and then reads stk_saved with a
//    compiler barrier between (an asymmetric Dekker, as traceback.cpp's
//    scan_g). Either sysmon sees it running and gives the chunk up, or
//    execute sees the claim and waits, then restores.
//  - A released G's live pages are missing and its chunk registered, so
//    every touch of them reaches the handler, which restores the G's stack
//    (UFFDIO_COPY, which wakes the faulting threads) before anything reads
//    them. Restores are serialised per G by the stk_saved CAS.
//  - Pages of a registered chunk that were not live (below a saved stack
//    pointer, never touched) are filled with the zero page on their first
//    touch, as a fresh fault would have; the chunk is unregistered once all
//    of its goroutines are restored.
#include "runtime/stackshrink.hpp"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "interpose/real.hpp"
#include "runtime/coarseclock.hpp"
#include "runtime/g.hpp"
#include "runtime/panic.hpp"
#include "runtime/proc.hpp"
#include "runtime/san.hpp"
#include "runtime/stack.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

namespace {

#ifndef MREMAP_DONTUNMAP
constexpr int MREMAP_DONTUNMAP = 4;
#endif

// A chunk has at most this many stacks (stack.cpp's max_chunk_stacks).
constexpr std::size_t max_slots = 64;
// A parked stack with more live bytes than this is not released: the
// chunk it is in stays resident.
constexpr std::size_t max_live = 16 * 1024;
// How often sysmon looks for idle chunks, at most.
constexpr std::int64_t scan_period_ns = 1'000'000'000;

struct chunk_rec;

// The heap buffer of a released stack: this header, then the live bytes.
struct saved_stack {
  std::uintptr_t lo;  // stack address of the first saved byte
  std::size_t len;    // bytes saved: [lo, lo + len) is [lo, stk.hi)
  chunk_rec* rec;
};
static_assert(alignof(std::max_align_t) > stack_tag_mask,
              "stk_saved tags live in a buffer pointer's low bits");

struct chunk_rec {
  char* base = nullptr;
  std::size_t n = 0;        // stacks in the chunk
  std::size_t stride = 0;   // bytes per stack, guard page included
  bool guarded = false;     // guards are madvise markers (mremap moves them)
  bool registered = false;  // with the userfaultfd; under rel_mu
  std::atomic<int> nreleased{0};  // its stacks released now
  int faults = 0;  // handler faults since its last release; handler only
  G* owner[max_slots] = {};   // the released Gs; under rel_mu
  std::size_t scan_idx = 0;   // sysmon's scan only
  chunk_rec* next = nullptr;  // the registry, newest first
  std::size_t bytes() const { return n * stride; }
};

std::atomic<chunk_rec*> chunks{nullptr};  // every chunk ever mapped
std::atomic<char*> carving{nullptr};      // the chunk stack.cpp carves
// Registered chunks by base, for the fault handler. sysmon and the handler
// thread take it, never a goroutine or execute.
std::mutex rel_mu;
std::vector<chunk_rec*> registered;
int uffd = -1;
// 0: not tried yet, 1: works, -1: not on this system. Written by sysmon.
std::atomic<int> avail{0};
char* scratch = nullptr;
std::size_t scratch_size = 0;
std::int64_t last_scan = 0;
std::atomic<std::uint64_t> nreleased_now{0};

chunk_rec* find_registered(std::uintptr_t addr) {
  auto it = std::upper_bound(registered.begin(), registered.end(), addr,
                             [](std::uintptr_t a, const chunk_rec* r) {
                               return a < std::uintptr_t(r->base);
                             });
  if (it == registered.begin()) return nullptr;
  chunk_rec* r = *--it;
  if (addr >= std::uintptr_t(r->base) + r->bytes()) return nullptr;
  return r;
}

void handle_fault(std::uintptr_t addr) {
  std::uintptr_t page = addr & ~(page_size - 1);
  G* gp = nullptr;
  G* rest[max_slots];
  std::size_t nrest = 0;
  {
    std::lock_guard<std::mutex> lk(rel_mu);
    if (chunk_rec* r = find_registered(page)) {
      gp = r->owner[(page - std::uintptr_t(r->base)) / r->stride];
      // A second fault in the same chunk: its goroutines are being woken
      // one after another (a close, a broadcast, a wait queue drained in
      // the order they parked, which is the order of their stacks).
      // Restore the whole chunk, so that the next wakers do not each
      // wait for a round trip through this thread (~30 us here).
      if (++r->faults == 2)
        for (std::size_t i = 0; i < r->n; i++)
          if (r->owner[i] != nullptr && r->owner[i] != gp)
            rest[nrest++] = r->owner[i];
    }
  }
  // A touch of a released goroutine's stack: bring all of it back (it
  // waits while sysmon is still releasing it). Its UFFDIO_COPY wakes us.
  if (gp != nullptr && page >= gp->stk.lo && page < gp->stk.hi)
    stack_restore_slow(gp);
  // Anything still missing was not live: the zero page, as a fresh fault
  // would give (EEXIST: it is present now). Then wake whoever waits.
  uffdio_zeropage z{};
  z.range.start = page;
  z.range.len = page_size;
  ioctl(uffd, UFFDIO_ZEROPAGE, &z);
  uffdio_range w{page, page_size};
  ioctl(uffd, UFFDIO_WAKE, &w);
  for (std::size_t i = 0; i < nrest; i++) stack_restore_slow(rest[i]);
}

void* handler_main(void*) {
  // No signal lands here: a goroutine dump (SIGQUIT) run on this thread
  // would fault on released stacks and wait for this very thread.
  sigset_t all;
  sigfillset(&all);
  syscall(SYS_rt_sigprocmask, SIG_SETMASK, &all, nullptr, _NSIG / 8);
  for (;;) {
    uffd_msg msg;
    ssize_t r = goro::rt::sys::real().read(uffd, &msg, sizeof msg);
    if (r != ssize_t(sizeof msg)) {
      if (r < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      fatalf("runtime: reading the stack userfaultfd: %s",
             r < 0 ? std::strerror(errno) : "short read");
    }
    if (msg.event == UFFD_EVENT_PAGEFAULT)
      handle_fault(std::uintptr_t(msg.arg.pagefault.address));
  }
  return nullptr;
}

// Opens the userfaultfd and starts its handler thread: once, from sysmon.
bool release_init() {
  if (avail != 0) return avail > 0;
  avail = -1;
#ifdef GORO_HAVE_TSAN
  return false;  // TSan would not see the kernel's copies into stacks
#endif
  if (default_guard() != guard_kind::madvise) return false;
  int fd = int(syscall(SYS_userfaultfd, O_CLOEXEC));
  if (fd < 0) return false;  // EPERM without CAP_SYS_PTRACE, seccomp, ...
  uffdio_api api{};
  api.api = UFFD_API;
  if (ioctl(fd, UFFDIO_API, &api) != 0) {
    close(fd);
    return false;
  }
  scratch_size = max_slots * default_stack_size();
  void* p = mmap(nullptr, scratch_size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) {
    close(fd);
    return false;
  }
  scratch = static_cast<char*>(p);
  uffd = fd;
  pthread_t t;
  if (pthread_create(&t, nullptr, handler_main, nullptr) != 0) {
    munmap(scratch, scratch_size);
    close(fd);
    uffd = -1;
    return false;
  }
  pthread_detach(t);
  avail = 1;
  return true;
}

void unclaim(G* const* gs, std::size_t n) {
  for (std::size_t i = 0; i < n; i++)
    gs[i]->stk_saved.store(0, std::memory_order_release);
}

// Releases the stacks of `rec`, all of whose goroutines are in `gs`
// (indexed by slot). False if one of them started running meanwhile, or if
// the system refused (then release is off from now on).
bool release_chunk(chunk_rec* rec, G* const* gs) {
  const std::size_t n = rec->n;
  for (std::size_t i = 0; i < n; i++)
    gs[i]->stk_saved.store(stack_releasing, std::memory_order_seq_cst);
  heavy_fence();
  for (std::size_t i = 0; i < n; i++) {
    // Still parked (or queued, not yet running), and still on this slot's
    // stack: since the scan it may have run, exited and been reused by a
    // new goroutine with another stack, while this one went to another G.
    std::uint32_t st = readgstatus(gs[i]);
    if ((st != g_waiting && st != g_runnable) ||
        gs[i]->stk.map_base != rec->base + i * rec->stride ||
        gs[i]->sched_sp == nullptr) {
      unclaim(gs, n);
      return false;
    }
  }
  {
    std::lock_guard<std::mutex> lk(rel_mu);
    if (!rec->registered) {
      uffdio_register reg{};
      reg.range.start = std::uintptr_t(rec->base);
      reg.range.len = rec->bytes();
      reg.mode = UFFDIO_REGISTER_MODE_MISSING;
      if (ioctl(uffd, UFFDIO_REGISTER, &reg) != 0) {
        unclaim(gs, n);
        avail = -1;
        return false;
      }
      rec->registered = true;
      registered.insert(
          std::upper_bound(registered.begin(), registered.end(), rec,
                           [](const chunk_rec* a, const chunk_rec* b) {
                             return a->base < b->base;
                           }),
          rec);
    }
    for (std::size_t i = 0; i < n; i++) rec->owner[i] = gs[i];
    rec->faults = 0;
  }
  // Every page of the chunk leaves at once; from here on a touch waits for
  // the handler, which waits for the claims below to become buffers.
  void* moved =
      mremap(rec->base, rec->bytes(), rec->bytes(),
             MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, scratch);
  if (moved == MAP_FAILED) {
    unclaim(gs, n);
    avail = -1;
    return false;
  }
  saved_stack* saved[max_slots];
  iovec to[max_slots], from[max_slots];
  std::size_t total = 0;
  for (std::size_t i = 0; i < n; i++) {
    G* gp = gs[i];
    // The live bytes: from the saved stack pointer (16-byte aligned down)
    // to the top. Nothing below sched_sp is live while a G is parked.
    std::uintptr_t lo = std::uintptr_t(gp->sched_sp) & ~std::uintptr_t(15);
    std::size_t len = gp->stk.hi - lo;
    auto* sv =
        static_cast<saved_stack*>(std::malloc(sizeof(saved_stack) + len));
    if (sv == nullptr) fatal("runtime: out of memory saving an idle stack");
    sv->lo = lo;
    sv->len = len;
    sv->rec = rec;
    saved[i] = sv;
    to[i] = {sv + 1, len};
    from[i] = {scratch + (lo - std::uintptr_t(rec->base)), len};
    total += len;
  }
  // One kernel copy for the chunk: the kernel reads the moved pages
  // through its own mapping, where a memcpy here would first make the
  // hypervisor map each page at its new address (~5 us a page on PVM).
  if (process_vm_readv(getpid(), to, n, from, n, 0) != ssize_t(total))
    for (std::size_t i = 0; i < n; i++)
      std::memcpy(to[i].iov_base, from[i].iov_base, to[i].iov_len);
  stack_guards_reinstall(rec->base, n);
  // The moved pages go back to the OS with the scratch range's old mapping.
  if (mmap(scratch, scratch_size, PROT_NONE,
           MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1,
           0) == MAP_FAILED)
    fatalf("runtime: cannot reset the stack scratch range: %s",
           std::strerror(errno));
  rec->nreleased.fetch_add(int(n), std::memory_order_relaxed);
  nreleased_now.fetch_add(n, std::memory_order_relaxed);
  for (std::size_t i = 0; i < n; i++)
    gs[i]->stk_saved.store(
        reinterpret_cast<std::uintptr_t>(saved[i]) | stack_released_tag,
        std::memory_order_release);
  return true;
}

// Chunks whose goroutines are all back get normal page faults again.
void unregister_restored() {
  std::lock_guard<std::mutex> lk(rel_mu);
  auto keep = registered.begin();
  for (chunk_rec* r : registered) {
    if (r->nreleased.load(std::memory_order_acquire) == 0) {
      uffdio_range range{std::uintptr_t(r->base), r->bytes()};
      ioctl(uffd, UFFDIO_UNREGISTER, &range);
      r->registered = false;
      std::fill(std::begin(r->owner), std::end(r->owner), nullptr);
    } else {
      *keep++ = r;
    }
  }
  registered.erase(keep, registered.end());
}

// Rebuilds gp's released stack from its buffer, a page at a time.
void restore_pages(G* gp, saved_stack* sv) {
  alignas(page_size) unsigned char page[page_size];
  const auto* src = reinterpret_cast<const unsigned char*>(sv + 1);
  const std::uintptr_t end = sv->lo + sv->len;
  for (std::uintptr_t p = sv->lo & ~(page_size - 1); p < end; p += page_size) {
    std::uintptr_t a = std::max(p, sv->lo);
    std::uintptr_t b = std::min(p + page_size, end);
    std::memset(page, 0, page_size);
    std::memcpy(page + (a - p), src + (a - sv->lo), b - a);
    uffdio_copy c{};
    c.dst = p;
    c.src = reinterpret_cast<std::uintptr_t>(page);
    c.len = page_size;
    while (ioctl(uffd, UFFDIO_COPY, &c) != 0) {
      if (errno == EAGAIN) continue;  // the mappings changed meanwhile
      // EEXIST would mean something filled a live page: its bytes would
      // be lost, so this is fatal rather than ignored.
      fatalf("runtime: cannot restore goroutine %llu's stack: %s",
             static_cast<unsigned long long>(gp->goid), std::strerror(errno));
    }
  }
  chunk_rec* rec = sv->rec;
  std::free(sv);
  gp->stk_saved.store(0, std::memory_order_release);
  nreleased_now.fetch_sub(1, std::memory_order_relaxed);
  rec->nreleased.fetch_sub(1, std::memory_order_release);
}

}  // namespace

void stackshrink_chunk(char* base, std::size_t n, std::size_t stride,
                       bool guarded) {
  if (n > max_slots) return;
  auto* r = new chunk_rec;
  r->base = base;
  r->n = n;
  r->stride = stride;
  r->guarded = guarded;
  chunk_rec* head = chunks.load(std::memory_order_relaxed);
  do {
    r->next = head;
  } while (!chunks.compare_exchange_weak(head, r, std::memory_order_release,
                                         std::memory_order_relaxed));
}

void stackshrink_carving(char* base) {
  carving.store(base, std::memory_order_release);
}

void stack_restore_slow(G* gp) {
  for (;;) {
    std::uintptr_t v = gp->stk_saved.load(std::memory_order_acquire);
    if (v == 0) return;
    if ((v & stack_tag_mask) == stack_released_tag) {
      std::uintptr_t mine = (v & ~stack_tag_mask) | stack_restoring_tag;
      if (gp->stk_saved.compare_exchange_weak(v, mine,
                                              std::memory_order_acquire)) {
        restore_pages(gp, reinterpret_cast<saved_stack*>(v & ~stack_tag_mask));
        return;
      }
      continue;
    }
    sched_yield();  // being released, or restored by another thread
  }
}

std::size_t stackshrink_release() {
  if (debug.stackrelease <= 0) return 0;
#ifdef GORO_HAVE_TSAN
  // Release is off under TSan (release_init), so skip the scan too: its
  // lock-free walk of allgs reads fields of Gs that TSan cannot order
  // after their last stackfree.
  return 0;
#endif
  // A scan walks every G: at most once a second, and no more often than
  // an eighth of the threshold (every 7.5 s by default).
  std::int64_t now = nanotime();
  std::int64_t period = std::max<std::int64_t>(
      scan_period_ns, std::int64_t(debug.stackrelease) * 1000000 / 8);
  if (last_scan != 0 && now - last_scan < period) return 0;
  last_scan = now;
  if (avail.load(std::memory_order_relaxed) < 0) return 0;
  if (avail.load(std::memory_order_relaxed) > 0) unregister_restored();

  std::vector<chunk_rec*> all;
  char* busy = carving.load(std::memory_order_acquire);
  for (chunk_rec* r = chunks.load(std::memory_order_acquire); r; r = r->next)
    if (r->guarded && r->base != busy) all.push_back(r);
  if (all.empty()) return 0;
  std::sort(all.begin(), all.end(), [](const chunk_rec* a, const chunk_rec* b) {
    return a->base < b->base;
  });
  for (std::size_t i = 0; i < all.size(); i++) all[i]->scan_idx = i;
  std::vector<G*> cand(all.size() * max_slots, nullptr);
  std::vector<std::uint8_t> ncand(all.size(), 0);

  // Parked long enough, on a default stack, with few live bytes. The walk
  // takes no lock: Gs are only ever prepended to allgs.
  const std::int64_t idle_s = (std::int64_t(debug.stackrelease) + 999) / 1000;
  const std::int64_t cnow = coarse_clock_exact();
  for (G* gp = allgs_snapshot(); gp != nullptr; gp = gp->alllink) {
    if (readgstatus(gp) != g_waiting || !gp->stk.chunked) continue;
    if (gp->stk.guard != guard_kind::madvise) continue;
    if (gp->stk_saved.load(std::memory_order_relaxed) != 0) continue;
    std::int64_t since = gp->waitsince.load(std::memory_order_relaxed);
    if (since == 0 || cnow - since < idle_s) continue;
    auto sp = std::uintptr_t(gp->sched_sp);
    if (sp < gp->stk.lo || sp >= gp->stk.hi || gp->stk.hi - sp > max_live)
      continue;
    auto base = reinterpret_cast<std::uintptr_t>(gp->stk.map_base);
    auto it = std::upper_bound(all.begin(), all.end(), base,
                               [](std::uintptr_t a, const chunk_rec* r) {
                                 return a < std::uintptr_t(r->base);
                               });
    if (it == all.begin()) continue;
    chunk_rec* r = *--it;
    std::size_t slot = (base - std::uintptr_t(r->base)) / r->stride;
    if (slot >= r->n || cand[r->scan_idx * max_slots + slot] != nullptr)
      continue;
    cand[r->scan_idx * max_slots + slot] = gp;
    ncand[r->scan_idx]++;
  }
  std::size_t released = 0;
  for (chunk_rec* r : all) {
    if (ncand[r->scan_idx] != r->n) continue;
    if (r->nreleased.load(std::memory_order_acquire) != 0) continue;
    // The userfaultfd and its thread only once there is something to
    // release: most programs never start them.
    if (!release_init()) break;
    if (!release_chunk(r, &cand[r->scan_idx * max_slots])) {
      if (avail < 0) break;
      continue;
    }
    released += r->n;
  }
  return released;
}

int stackshrink_threads() {
  return avail.load(std::memory_order_acquire) > 0 ? 1 : 0;
}

std::uint64_t stacks_released_now() {
  return nreleased_now.load(std::memory_order_relaxed);
}

bool stack_release_available() {
  return avail.load(std::memory_order_relaxed) > 0;
}

}  // namespace goro::rt
