// The unwind information (CFI) of the context switch, src/runtime/
// context_amd64.S, checked at every instruction.
//
// A signal can land on any instruction of goro_mcall, goro_gogo and
// goro_gstart (a profiler's, and later the goroutine dump's and async
// preemption's), and its handler may unwind the interrupted stack. The test
// single-steps real goroutine switches with the x86 trap flag (EFLAGS.TF):
// every instruction raises SIGTRAP, and while the interrupted instruction
// lies in one of the three routines, the handler unwinds from the signal
// context with _Unwind_Backtrace (the libgcc unwinder that C++ exceptions,
// glibc's backtrace() and most profilers use) and checks that:
//  - the unwind ends cleanly (_URC_END_OF_STACK) within a bounded number of
//    frames, and every frame's address lies in executable code;
//  - the interrupted frame's caller is the one that the stack really
//    resumes: its return address, canonical frame address and callee-saved
//    registers are those saved on the stack (on the goroutine's side: the
//    goro_mcall caller; after goro_gogo has moved to the goroutine's stack:
//    the goroutine being resumed);
//  - a backtrace on a goroutine's stack reaches the goroutine's own code
//    (goro_switch_cfi_yield below) and ends at goro_gstart, and one on g0
//    ends at goro_mcall's g0 frame.
// A fault inside the unwinder (what garbage CFI usually causes) is caught
// and reported as a failure. The test also checks that the steps covered
// each routine from its entry to its final instruction (nothing after it but
// a trailing ud2), on both sides of each stack switch, and goro_gogo
// resuming both a new goroutine (goro_gstart) and a parked one.
//
// Sanitizer builds skip it: their runtimes own the signal handlers and the
// stepped path would run through their fiber-switch hooks; the assembly is
// the same in every build.
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <goro/goro.hpp>
#include <string>

#include "test_support.hpp"

extern "C" {
void goro_mcall(void** save_sp, void* g0_sp, void (*fn)(void*), void* arg);
[[noreturn]] void goro_gogo(void* sp);
void goro_gstart();
}

#if defined(__x86_64__)

namespace {

// ---------------------------------------------------------------------------
// Symbols and code ranges
// ---------------------------------------------------------------------------

struct range {
  std::uintptr_t lo = 0, hi = 0;
  bool contains(std::uintptr_t a) const { return a >= lo && a < hi; }
};

// The loaded object that holds `addr`: its path and load bias.
struct object_info {
  std::uintptr_t addr = 0;
  std::uintptr_t bias = 0;
  std::string path;
  const ElfW(Phdr) * phdr = nullptr;
  int phnum = 0;
  bool found = false;
};

int find_object_cb(dl_phdr_info* info, std::size_t, void* data) {
  auto* o = static_cast<object_info*>(data);
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    range r{info->dlpi_addr + ph.p_vaddr,
            info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
    if (!r.contains(o->addr)) continue;
    o->bias = info->dlpi_addr;
    o->path = info->dlpi_name && info->dlpi_name[0] ? info->dlpi_name
                                                    : "/proc/self/exe";
    o->phdr = info->dlpi_phdr;
    o->phnum = info->dlpi_phnum;
    o->found = true;
    return 1;
  }
  return 0;
}

object_info find_object(std::uintptr_t addr) {
  object_info o;
  o.addr = addr;
  dl_iterate_phdr(find_object_cb, &o);
  return o;
}

// The address range [start, start + st_size) of a symbol, from the ELF
// symbol table (.symtab, else .dynsym) of the object that holds `addr`.
range symbol_range(std::uintptr_t addr, const char* name) {
  object_info o = find_object(addr);
  if (!o.found) return {};
  int fd = ::open(o.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  struct stat st {};
  range result;
  if (::fstat(fd, &st) == 0 && st.st_size > 0) {
    void* map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ,
                       MAP_PRIVATE, fd, 0);
    if (map != MAP_FAILED) {
      const auto* base = static_cast<const unsigned char*>(map);
      const auto* eh = reinterpret_cast<const ElfW(Ehdr)*>(base);
      if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
          eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_shoff != 0) {
        const auto* sh =
            reinterpret_cast<const ElfW(Shdr)*>(base + eh->e_shoff);
        for (unsigned want : {unsigned(SHT_SYMTAB), unsigned(SHT_DYNSYM)}) {
          for (int i = 0; i < eh->e_shnum && result.hi == 0; i++) {
            if (sh[i].sh_type != want || sh[i].sh_entsize == 0) continue;
            const auto* syms =
                reinterpret_cast<const ElfW(Sym)*>(base + sh[i].sh_offset);
            const char* strs = reinterpret_cast<const char*>(
                base + sh[sh[i].sh_link].sh_offset);
            std::size_t n = sh[i].sh_size / sh[i].sh_entsize;
            for (std::size_t k = 0; k < n; k++) {
              if (std::strcmp(strs + syms[k].st_name, name) != 0) continue;
              if (syms[k].st_size == 0) continue;
              result.lo = o.bias + syms[k].st_value;
              result.hi = result.lo + syms[k].st_size;
              break;
            }
          }
          if (result.hi != 0) break;
        }
      }
      ::munmap(map, static_cast<std::size_t>(st.st_size));
    }
  }
  ::close(fd);
  return result;
}

// Executable PT_LOAD segments of every loaded object (the vDSO included).
constexpr int max_exec = 256;
range exec_ranges[max_exec];
int n_exec = 0;

int collect_exec_cb(dl_phdr_info* info, std::size_t, void*) {
  for (int i = 0; i < info->dlpi_phnum && n_exec < max_exec; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD || !(ph.p_flags & PF_X)) continue;
    exec_ranges[n_exec++] = {info->dlpi_addr + ph.p_vaddr,
                             info->dlpi_addr + ph.p_vaddr + ph.p_memsz};
  }
  return 0;
}

bool in_exec(std::uintptr_t a) {
  for (int i = 0; i < n_exec; i++)
    if (exec_ranges[i].contains(a)) return true;
  return false;
}

// ---------------------------------------------------------------------------
// State shared with the SIGTRAP handler (only the stepped thread touches it
// while a trace runs; the scheduler's hand-offs order it with the readers)
// ---------------------------------------------------------------------------

enum routine_id { r_mcall, r_gogo, r_gstart, n_routines };
const char* const routine_names[n_routines] = {"goro_mcall", "goro_gogo",
                                               "goro_gstart"};
constexpr std::size_t max_routine_size = 512;

struct routine_cov {
  range r;
  bool seen[max_routine_size];
  long checks = 0;
  long goroutine_side = 0;      // states checked on a goroutine's stack
  long g0_side = 0;             // states checked on g0
  bool exited = false;          // left through its final call, ret or jump
  std::uintptr_t exit_end = 0;  // offset just past that instruction
};

routine_cov cov[n_routines];
range yield_range;  // goro_switch_cfi_yield

struct failure {
  int routine;
  std::uintptr_t offset;
  const char* what;
  std::uintptr_t detail;
};
constexpr int max_failures = 64;
failure failures[max_failures];
int n_failures = 0;
long total_failures = 0;
// The frames of the first failure, for the report.
constexpr int max_frames = 128;
std::uintptr_t first_fail_frames[max_frames];
int first_fail_nframes = 0;

struct frame {
  std::uintptr_t ip;    // as reported (exact for the interrupted frame)
  std::uintptr_t look;  // the address the unwinder looks up (ip - 1 for calls)
  // _Unwind_GetCFA: libgcc keeps the CFA of the frame below (the callee)
  // in the caller's context, so f[i + 1].cfa is frame i's CFA.
  std::uintptr_t cfa;
  std::uintptr_t gr[17];  // DWARF numbering; callee-saved ones filled in
};

struct walk {
  frame f[max_frames];
  int n = 0;
  std::uintptr_t rip = 0;  // the interrupted instruction
  bool too_deep = false;
  bool bad_ip = false;
};

// The current trace (one traced goroutine switch).
struct trace_state {
  bool active = false;
  bool saw_gogo = false;
  bool done = false;
  bool capped = false;
  int prev_routine = -1;
  std::uintptr_t prev_rip = 0, prev_rsp = 0;
  long steps = 0;
  // goro_mcall's entry: the caller's state that its CFI must reproduce.
  bool have_entry = false;
  std::uintptr_t entry_rsp = 0, entry_ra = 0;
  std::uintptr_t entry_regs[17] = {};
};
trace_state tr;
constexpr long max_steps = 2'000'000;
long traces_done = 0, traces_fresh = 0, traces_resumed = 0;

// Callee-saved registers (DWARF numbers) and their ucontext slots.
constexpr int callee_saved_dwarf[] = {3, 6, 12, 13, 14, 15};  // rbx rbp r12-15
int greg_of_dwarf(int d) {
  switch (d) {
    case 3:
      return REG_RBX;
    case 6:
      return REG_RBP;
    case 12:
      return REG_R12;
    case 13:
      return REG_R13;
    case 14:
      return REG_R14;
    case 15:
      return REG_R15;
  }
  return -1;
}

// ---------------------------------------------------------------------------
// Fault guard around the unwinder
// ---------------------------------------------------------------------------

sigjmp_buf guard_jmp;
volatile sig_atomic_t guard_armed = 0;
volatile pid_t guard_tid = 0;
struct sigaction old_segv, old_bus, old_trap;

pid_t gettid_raw() { return static_cast<pid_t>(::syscall(SYS_gettid)); }

void on_fault(int sig, siginfo_t*, void*) {
  if (guard_armed && guard_tid == gettid_raw()) {
    guard_armed = 0;
    siglongjmp(guard_jmp, sig);
  }
  // Not the unwinder's: put the previous handler back and fault again.
  sigaction(sig, sig == SIGBUS ? &old_bus : &old_segv, nullptr);
}

_Unwind_Reason_Code walk_cb(_Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<walk*>(arg);
  if (w->n == max_frames) {
    w->too_deep = true;
    return _URC_NORMAL_STOP;
  }
  int before = 0;
  std::uintptr_t ip = _Unwind_GetIPInfo(ctx, &before);
  // Registers only for the interrupted frame's caller, the one checked.
  const bool regs = w->n > 0 && w->f[w->n - 1].ip == w->rip;
  frame& f = w->f[w->n++];
  f.ip = ip;
  f.look = before || ip == 0 ? ip : ip - 1;
  f.cfa = _Unwind_GetCFA(ctx);
  if (regs && ip != 0)
    for (int d : callee_saved_dwarf) f.gr[d] = _Unwind_GetGR(ctx, d);
  // Stop at once on an address outside the code: the next step would
  // interpret whatever lies there.
  if (ip != 0 && !in_exec(f.look)) {
    w->bad_ip = true;
    return _URC_NORMAL_STOP;
  }
  return _URC_NO_REASON;
}

void fail(int ri, std::uintptr_t off, const char* what, std::uintptr_t detail,
          const walk* w) {
  total_failures++;
  if (n_failures < max_failures)
    failures[n_failures++] = {ri, off, what, detail};
  if (w && total_failures == 1) {
    first_fail_nframes = w->n;
    for (int i = 0; i < w->n; i++) first_fail_frames[i] = w->f[i].ip;
  }
}

int routine_of(std::uintptr_t a) {
  for (int i = 0; i < n_routines; i++)
    if (cov[i].r.contains(a)) return i;
  return -1;
}

// Checks the unwind from the state in `uc`, interrupted inside routine ri.
__attribute__((noinline)) void check_state(int ri, ucontext_t* uc) {
  greg_t* g = uc->uc_mcontext.gregs;
  auto reg = [g](int r) { return static_cast<std::uintptr_t>(g[r]); };
  const std::uintptr_t rip = reg(REG_RIP), rsp = reg(REG_RSP);
  const std::uintptr_t off = rip - cov[ri].r.lo;
  static walk w;  // one stepped thread at a time; keeps the frames off-stack
  w.n = 0;
  w.rip = rip;
  w.too_deep = w.bad_ip = false;

  guard_tid = gettid_raw();
  int sig = sigsetjmp(guard_jmp, 1);
  _Unwind_Reason_Code rc = _URC_NO_REASON;
  if (sig == 0) {
    guard_armed = 1;
    rc = _Unwind_Backtrace(walk_cb, &w);
    guard_armed = 0;
  } else {
    fail(ri, off, "the unwinder faulted (signal in detail)",
         static_cast<std::uintptr_t>(sig), &w);
    return;
  }
  if (w.bad_ip) {
    fail(ri, off, "a frame's address is outside executable code (in detail)",
         w.f[w.n - 1].ip, &w);
    return;
  }
  if (w.too_deep) {
    fail(ri, off, "the unwind did not end (frames in detail)", max_frames, &w);
    return;
  }
  if (rc != _URC_END_OF_STACK) {
    fail(ri, off, "the unwind did not end with _URC_END_OF_STACK (rc)",
         static_cast<std::uintptr_t>(rc), &w);
    return;
  }
  // The terminal callback has ip 0 (a frame whose return address is
  // undefined); drop it. It may also end at a frame without unwind info.
  int n = w.n;
  if (n > 0 && w.f[n - 1].ip == 0) n--;
  // Find the interrupted frame: the signal frame, reported at the exact rip.
  int fi = -1;
  for (int i = 0; i < n; i++)
    if (w.f[i].ip == rip) {
      fi = i;
      break;
    }
  if (fi < 0) {
    fail(ri, off, "the interrupted frame is missing from the backtrace", rip,
         &w);
    return;
  }
  const frame* fr = w.f + fi;
  const int callers = n - fi - 1;  // frames after the interrupted one
  const frame& last = w.f[n - 1];
  auto chain_has = [&](const range& r) {
    for (int i = fi + 1; i < n; i++)
      if (r.contains(w.f[i].look)) return true;
    return false;
  };
  auto expect = [&](bool ok, const char* what, std::uintptr_t detail) {
    if (!ok) fail(ri, off, what, detail, &w);
    return ok;
  };
  // A goroutine's backtrace: through the test's own code to goro_gstart.
  auto expect_goroutine_chain = [&](bool need_yield) {
    if (need_yield)
      expect(chain_has(yield_range),
             "goroutine backtrace misses goro_switch_cfi_yield (frames)",
             static_cast<std::uintptr_t>(callers));
    expect(cov[r_gstart].r.contains(last.look),
           "goroutine backtrace does not end at goro_gstart (last ip)",
           last.ip);
  };
  auto expect_regs = [&](const frame& caller, const std::uintptr_t* want) {
    for (int d : callee_saved_dwarf)
      if (!expect(caller.gr[d] == want[d],
                  "caller's callee-saved register is wrong (DWARF reg)",
                  static_cast<std::uintptr_t>(d)))
        return;
  };

  cov[ri].checks++;
  switch (ri) {
    case r_mcall: {
      if (off == 0) {
        tr.have_entry = true;
        tr.entry_rsp = rsp;
        tr.entry_ra = *reinterpret_cast<std::uintptr_t*>(rsp);
        for (int d : callee_saved_dwarf)
          tr.entry_regs[d] = reg(greg_of_dwarf(d));
      }
      if (rsp == reg(REG_RSI)) {
        // On g0 (rsp = g0_sp): a fresh outermost frame.
        cov[ri].g0_side++;
        expect(callers == 0,
               "g0 side of goro_mcall must be the outermost frame (callers)",
               static_cast<std::uintptr_t>(callers));
        break;
      }
      cov[ri].goroutine_side++;
      if (!expect(tr.have_entry, "goro_mcall stepped without its entry", 0))
        break;
      if (!expect(callers > 0, "goro_mcall frame has no caller", 0)) break;
      expect(fr[1].cfa == tr.entry_rsp + 8, "goro_mcall frame's CFA is wrong",
             fr[1].cfa);
      expect(fr[1].ip == tr.entry_ra,
             "goro_mcall's caller is not its return address (ip)", fr[1].ip);
      expect_regs(fr[1], tr.entry_regs);
      expect_goroutine_chain(true);
      break;
    }
    case r_gogo: {
      const std::uintptr_t sp = reg(REG_RDI);  // the saved context
      const bool on_goroutine = rsp >= sp && rsp <= sp + 64;
      if (!on_goroutine) {
        // Still on g0, called from execute().
        cov[ri].g0_side++;
        if (!expect(callers > 0, "goro_gogo on g0 has no caller", 0)) break;
        expect(fr[1].cfa == rsp + 8, "goro_gogo frame's CFA on g0 is wrong",
               fr[1].cfa);
        expect(fr[1].ip == *reinterpret_cast<std::uintptr_t*>(rsp),
               "goro_gogo's caller on g0 is not its return address (ip)",
               fr[1].ip);
        expect(cov[r_mcall].r.contains(last.look),
               "g0 backtrace does not end at goro_mcall (last ip)", last.ip);
        break;
      }
      // On the resumed goroutine's stack: its goro_mcall frame
      // [mxcsr|fcw][r15][r14][r13][r12][rbx][rbp][return address].
      cov[ri].goroutine_side++;
      const auto* slot = reinterpret_cast<const std::uintptr_t*>(sp);
      std::uintptr_t want[17] = {};
      want[15] = slot[1];
      want[14] = slot[2];
      want[13] = slot[3];
      want[12] = slot[4];
      want[3] = slot[5];
      want[6] = slot[6];
      if (!expect(callers > 0, "resumed goroutine's frame is missing", 0))
        break;
      expect(fr[1].cfa == sp + 64,
             "goro_gogo frame's CFA on the goroutine is wrong", fr[1].cfa);
      expect(fr[1].ip == slot[7],
             "goro_gogo's caller is not the resumed return address (ip)",
             fr[1].ip);
      expect_regs(fr[1], want);
      expect_goroutine_chain(!cov[r_gstart].r.contains(slot[7]));
      break;
    }
    case r_gstart:
      cov[ri].goroutine_side++;
      expect(callers == 0, "goro_gstart must be the outermost frame (callers)",
             static_cast<std::uintptr_t>(callers));
      break;
  }
}

void on_trap(int, siginfo_t*, void* ucv) {
  auto* uc = static_cast<ucontext_t*>(ucv);
  greg_t* g = uc->uc_mcontext.gregs;
  const auto rip = static_cast<std::uintptr_t>(g[REG_RIP]);
  const auto rsp = static_cast<std::uintptr_t>(g[REG_RSP]);
  auto stop = [g] { g[REG_EFL] &= ~greg_t{0x100}; };
  if (!tr.active) {
    stop();
    return;
  }
  tr.steps++;
  const int ri = routine_of(rip);
  const int pi = tr.prev_routine;
  if (pi >= 0 && ri != pi) {
    // Left routine pi: through a call (the return address is pushed),
    // a ret, or goro_gogo's final indirect jump through a register
    // (FF /4 with a register operand: two bytes, rsp unchanged).
    const auto* op = reinterpret_cast<const unsigned char*>(tr.prev_rip);
    std::uintptr_t end = 0;
    if (rsp == tr.prev_rsp - 8)
      end = *reinterpret_cast<std::uintptr_t*>(rsp);
    else if (rsp == tr.prev_rsp + 8 && op[0] == 0xC3)
      end = tr.prev_rip + 1;
    else if (rsp == tr.prev_rsp && op[0] == 0xFF && (op[1] & 0xF8) == 0xE0)
      end = tr.prev_rip + 2;
    if (end == 0) {
      fail(pi, tr.prev_rip - cov[pi].r.lo, "left the routine unexpectedly", rip,
           nullptr);
    } else {
      cov[pi].exited = true;
      cov[pi].exit_end = end - cov[pi].r.lo;
    }
  }
  if (ri >= 0) {
    std::uintptr_t off = rip - cov[ri].r.lo;
    if (off < max_routine_size) cov[ri].seen[off] = true;
    if (ri == r_gogo && !tr.saw_gogo) {
      tr.saw_gogo = true;
      const auto* slot = reinterpret_cast<const std::uintptr_t*>(g[REG_RDI]);
      if (cov[r_gstart].r.contains(slot[7]))
        traces_fresh++;
      else
        traces_resumed++;
    }
    check_state(ri, uc);
  } else if (tr.saw_gogo && pi >= 0) {
    // Back in C++ code on the resumed goroutine: the switch is over.
    tr.done = true;
    tr.active = false;
    traces_done++;
    stop();
  }
  tr.prev_routine = ri;
  tr.prev_rip = rip;
  tr.prev_rsp = rsp;
  if (tr.active && tr.steps >= max_steps) {
    tr.capped = true;
    tr.active = false;
    stop();
  }
}

inline void set_trap_flag() {
  // Below the red zone, then EFLAGS.TF: a SIGTRAP after every instruction
  // from the one after popfq on.
  asm volatile(
      "leaq -128(%%rsp), %%rsp\n\t"
      "pushfq\n\t"
      "orq $0x100, (%%rsp)\n\t"
      "popfq\n\t"
      "leaq 128(%%rsp), %%rsp" ::
          : "memory", "cc");
}

}  // namespace

// Yields to the scheduler; with `traced`, single-steps the switch. Its own
// frame stays on the stack across the switch (the call is not a tail call),
// so goroutine backtraces must pass through it.
extern "C" __attribute__((noinline)) void goro_switch_cfi_yield(bool traced) {
  if (traced) {
    if (tr.capped) return;  // a previous trace ran away: stop tracing
    tr = trace_state{};
    tr.active = true;
    set_trap_flag();
  }
  // Five distinct values live across the switch: the compilers keep them
  // in the callee-saved registers (rbx, r12-r15), so the register checks
  // tell the saved registers apart.
  std::uintptr_t k1 = 0x1b1b1b1b1b1b1b1b, k2 = 0x1c1c1c1c1c1c1c1c,
                 k3 = 0x1d1d1d1d1d1d1d1d, k4 = 0x1e1e1e1e1e1e1e1e,
                 k5 = 0x1f1f1f1f1f1f1f1f;
  asm volatile("" : "+r"(k1), "+r"(k2), "+r"(k3), "+r"(k4), "+r"(k5));
  goro::gosched();
  asm volatile("" ::"r"(k1), "r"(k2), "r"(k3), "r"(k4), "r"(k5) : "memory");
}

namespace {

TEST(SwitchCfi, BacktraceFromEveryInstructionOfTheSwitch) {
#if GORO_TEST_SANITIZED
  GTEST_SKIP() << "single-stepping the switch with the trap flag is not done "
                  "under ASan/TSan (their runtimes own the signal handlers "
                  "and the fiber hooks); the assembly is the same in every "
                  "build";
#endif
  const std::uintptr_t fns[n_routines] = {
      reinterpret_cast<std::uintptr_t>(&goro_mcall),
      reinterpret_cast<std::uintptr_t>(&goro_gogo),
      reinterpret_cast<std::uintptr_t>(&goro_gstart)};
  for (int i = 0; i < n_routines; i++) {
    cov[i] = routine_cov{};
    cov[i].r = symbol_range(fns[i], routine_names[i]);
    ASSERT_EQ(cov[i].r.lo, fns[i])
        << routine_names[i] << ": no sized ELF symbol (.size directive)";
    ASSERT_LE(cov[i].r.hi - cov[i].r.lo, max_routine_size) << routine_names[i];
  }
  yield_range =
      symbol_range(reinterpret_cast<std::uintptr_t>(&goro_switch_cfi_yield),
                   "goro_switch_cfi_yield");
  ASSERT_NE(yield_range.hi, 0u) << "no symbol for goro_switch_cfi_yield";
  n_exec = 0;
  dl_iterate_phdr(collect_exec_cb, nullptr);
  ASSERT_GT(n_exec, 0);

  // Warm the unwinder up outside a signal handler.
  {
    walk w;
    _Unwind_Backtrace(walk_cb, &w);
  }

  goro::options opt;
  opt.gomaxprocs = 1;
  int rc = goro::run(opt, [] {
    int old_procs = goro::gomaxprocs(1);
    // Installed here, after the runtime's own SIGSEGV/SIGBUS handlers
    // (stack overflow reports), which on_fault falls back to.
    struct sigaction sa {};
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, &old_segv);
    sigaction(SIGBUS, &sa, &old_bus);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTRAP, &sa, &old_trap);

    // Each round: a new goroutine, then two traced yields. The first
    // usually switches to the new goroutine (goro_gogo into goro_gstart),
    // which then yields back untraced; the second resumes it inside
    // goro_switch_cfi_yield. Rounds repeat until both kinds were traced.
    for (int round = 0; round < 50 && !tr.capped; round++) {
      if (traces_fresh > 2 && traces_resumed > 2) break;
      goro::wait_group wg;
      wg.add(1);
      goro::go([&wg] {
        goro_switch_cfi_yield(false);
        wg.done();
      });
      goro_switch_cfi_yield(true);
      goro_switch_cfi_yield(true);
      wg.wait();
    }

    sigaction(SIGTRAP, &old_trap, nullptr);
    sigaction(SIGSEGV, &old_segv, nullptr);
    sigaction(SIGBUS, &old_bus, nullptr);
    goro::gomaxprocs(old_procs);
  });
  ASSERT_EQ(rc, 0);

  EXPECT_FALSE(tr.capped) << "a traced switch did not complete within "
                          << max_steps << " steps";
  EXPECT_GT(traces_fresh, 0) << "goro_gogo never traced into a new goroutine";
  EXPECT_GT(traces_resumed, 0)
      << "goro_gogo never traced resuming a parked goroutine";

  std::string report;
  for (int i = 0; i < n_failures; i++) {
    char line[256];
    std::snprintf(line, sizeof line, "  %s+%#lx: %s: %#lx\n",
                  routine_names[failures[i].routine],
                  static_cast<unsigned long>(failures[i].offset),
                  failures[i].what,
                  static_cast<unsigned long>(failures[i].detail));
    report += line;
  }
  if (first_fail_nframes > 0) {
    report += "  frames of the first failure:";
    for (int i = 0; i < first_fail_nframes; i++) {
      char ip[32];
      std::snprintf(ip, sizeof ip, " %#lx",
                    static_cast<unsigned long>(first_fail_frames[i]));
      report += ip;
    }
    report += "\n";
  }
  EXPECT_EQ(total_failures, 0) << "unwinding from inside the switch failed ("
                               << total_failures << " checks):\n"
                               << report;

  // Coverage: each routine from its entry to its final instruction, after
  // which only a trailing ud2 (never executed) may follow.
  for (int i = 0; i < n_routines; i++) {
    const routine_cov& c = cov[i];
    const std::uintptr_t size = c.r.hi - c.r.lo;
    const auto* code = reinterpret_cast<const unsigned char*>(c.r.lo);
    std::string offs;
    for (std::uintptr_t o = 0; o < size; o++)
      if (c.seen[o]) offs += " " + std::to_string(o);
    SCOPED_TRACE(std::string(routine_names[i]) + " stepped at offsets" + offs +
                 " of " + std::to_string(size));
    std::uintptr_t first = 0;
    while (first < size && !c.seen[first]) first++;
    if (i == r_gstart) {
      // Entered where goro_gogo's jump lands: at most a few bytes in.
      EXPECT_LT(first, 4u);
    } else {
      EXPECT_EQ(first, 0u) << "entry not stepped";
    }
    EXPECT_TRUE(c.exited) << "never left through its final instruction";
    const bool ends_ok = c.exit_end == size ||
                         (c.exit_end + 2 == size && code[c.exit_end] == 0x0F &&
                          code[c.exit_end + 1] == 0x0B);
    EXPECT_TRUE(ends_ok) << "last stepped instruction ends at " << c.exit_end
                         << ", not at the end or a trailing ud2";
    EXPECT_GT(c.checks, 0);
    EXPECT_GT(c.goroutine_side, 0);
    if (i != r_gstart) {
      EXPECT_GT(c.g0_side, 0);
    }
  }
  std::printf(
      "traced switches: %ld (%ld into new goroutines, %ld resuming); "
      "states checked: mcall %ld, gogo %ld, gstart %ld\n",
      traces_done, traces_fresh, traces_resumed, cov[r_mcall].checks,
      cov[r_gogo].checks, cov[r_gstart].checks);
}

// The switch returns to addresses that no call pushed on that stack (a
// CET shadow stack would fault) and has no endbr64 landing pads, so the
// program must not claim SHSTK or IBT: the assembly object carries no
// .note.gnu.property, and the linker drops the claim from the output.
TEST(SwitchCfi, ProgramDoesNotClaimCet) {
  object_info o = find_object(reinterpret_cast<std::uintptr_t>(&goro_gogo));
  ASSERT_TRUE(o.found);
  for (int i = 0; i < o.phnum; i++) {
    const ElfW(Phdr)& ph = o.phdr[i];
    if (ph.p_type != PT_GNU_PROPERTY) continue;
    const auto* p = reinterpret_cast<const unsigned char*>(o.bias + ph.p_vaddr);
    const unsigned char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const unsigned char* name = p + sizeof(ElfW(Nhdr));
      const unsigned char* desc = name + ((nh->n_namesz + 7) & ~7u);
      const unsigned char* next = desc + ((nh->n_descsz + 7) & ~7u);
      if (nh->n_type == NT_GNU_PROPERTY_TYPE_0 && nh->n_namesz == 4 &&
          std::memcmp(name, "GNU", 4) == 0) {
        for (const unsigned char* q = desc; q + 8 <= desc + nh->n_descsz;) {
          std::uint32_t type, size;
          std::memcpy(&type, q, 4);
          std::memcpy(&size, q + 4, 4);
          if (type == GNU_PROPERTY_X86_FEATURE_1_AND && size >= 4) {
            std::uint32_t bits;
            std::memcpy(&bits, q + 8, 4);
            EXPECT_EQ(bits & GNU_PROPERTY_X86_FEATURE_1_IBT, 0u)
                << o.path << " claims IBT";
            EXPECT_EQ(bits & GNU_PROPERTY_X86_FEATURE_1_SHSTK, 0u)
                << o.path << " claims SHSTK (shadow stacks)";
          }
          q += 8 + ((size + 7) & ~7u);
        }
      }
      p = next;
    }
  }
}

}  // namespace

#else

TEST(SwitchCfi, BacktraceFromEveryInstructionOfTheSwitch) {
  GTEST_SKIP() << "x86-64 only";
}

#endif
