// traceback.cpp: see traceback.hpp.
//
// Unwinding uses the C++ runtime's own unwinder (_Unwind_Backtrace, DWARF
// CFI), so frames without frame pointers are followed. A switched-out
// goroutine is unwound by running the collector on its own stack, below its
// saved context, through goro_on_gstack (context_amd64.S), whose CFI
// describes that saved frame the way goro_gogo's does.
#include "runtime/traceback.hpp"

#include <linux/membarrier.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "interpose/real.hpp"
#include "runtime/asyncpreempt.hpp"
#include "runtime/coarseclock.hpp"
#include "runtime/funcname.hpp"
#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/panic.hpp"
#include "runtime/san.hpp"
#include "runtime/symtab.hpp"
#include "runtime/sysmon.hpp"
#include "runtime/tls.hpp"

extern "C" void goro_on_gstack(void* sp, void (*fn)(void*), void* arg);

namespace goro::rt {

std::atomic<G*> scan_g{nullptr};

void scan_wait(G* gp) {
  while (scan_g.load(std::memory_order_acquire) == gp) sched_yield();
}

// A full barrier on every thread of the process (the slow side of an
// asymmetric Dekker: execute's side is a compiler barrier): membarrier's
// private expedited command, or else an mprotect that takes write access
// away from a touched page, whose TLB shoot-down interrupts every CPU
// running this process.
void heavy_fence() {
  static std::atomic<int> mb{0};  // 0 unknown, 1 usable, -1 not
  int s = mb.load(std::memory_order_acquire);
  if (s == 0) {
    s = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0,
                0) == 0
            ? 1
            : -1;
    mb.store(s, std::memory_order_release);
  }
  if (s == 1 &&
      syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0)
    return;
  static void* page = mmap(nullptr, 4096, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) fatal("goroutine dump: no barrier page");
  mprotect(page, 4096, PROT_READ | PROT_WRITE);
  *static_cast<volatile char*>(page) = 1;
  mprotect(page, 4096, PROT_READ);
}

namespace {

constexpr int max_frames = 100;

// A switched-out goroutine's frames, unwound on its own stack while it
// cannot be resumed: scan_g names it, and execute, which stores the
// running status and then loads scan_g with only a compiler barrier in
// between, waits while it is named (scan_wait). The heavy barrier between
// naming it and reading its status again makes that store/load pair a
// Dekker handshake: either execute sees it named, or this sees it running
// and leaves its stack alone. False if it was resumed first.
bool switched_out_frames(G* gp, struct pc_buf* b);

struct pc_buf {
  std::uintptr_t pcs[max_frames + 1];
  int n = 0;
  bool truncated = false;  // more frames than pcs holds (given ones)
};

_Unwind_Reason_Code collect_one(struct _Unwind_Context* ctx, void* arg) {
  auto* b = static_cast<pc_buf*>(arg);
  int before = 0;
  std::uintptr_t pc = _Unwind_GetIPInfo(ctx, &before);
  if (pc == 0) return _URC_END_OF_STACK;
  // A return address points after its call: look up the call itself.
  if (!before) pc--;
  b->pcs[b->n++] = pc;
  return b->n > max_frames ? _URC_END_OF_STACK : _URC_NO_REASON;
}

void collect_here(void* arg) { _Unwind_Backtrace(collect_one, arg); }

bool switched_out_frames(G* gp, pc_buf* b) {
  static std::mutex mu;  // one scan_g
  std::lock_guard<std::mutex> lk(mu);
  scan_g.store(gp, std::memory_order_relaxed);
  heavy_fence();
  std::uint32_t st = readgstatus(gp);
  bool ok = (st == g_waiting || st == g_runnable) && gp->sched_sp != nullptr;
  if (ok) goro_on_gstack(gp->sched_sp, collect_here, b);
  scan_g.store(nullptr, std::memory_order_release);
  return ok;
}

// Frames of the runtime and of the standard library's call plumbing are
// left out, as Go leaves out runtime.* frames (GORO_TRACEBACK=system shows
// them); goro's public API frames (goro::chan<T>::recv,
// goro::mutex::lock_slow, ...) stay. `base`: func_base_name's form.
// `scoped`: the frame's pc has DWARF inline records, so code inlined into
// plumbing (the goroutine's lambda into goro::detail::closure's entry,
// into std::function's invoker...) shows as frames of its own; without
// them that plumbing stays, as the only frame that holds the code.
bool hidden(const std::string& base, bool scoped) {
  if (traceback_level(2) >= 3) return false;  // GORO_TRACEBACK=system
  auto starts = [&](const char* p) {
    return base.compare(0, std::strlen(p), p) == 0;
  };
  static const char* const plumbing[] = {"goro::detail::closure<",
                                         "goro::run<",
                                         "std::__invoke",
                                         "std::invoke<",
                                         "std::apply<",
                                         "std::__apply_impl<",
                                         "std::function<",
                                         "std::_Function_handler<"};
  for (const char* p : plumbing)
    if (starts(p)) return scoped;
  static const char* const runtime[] = {
      "goro::rt::",     "goro_",
      "goro::detail::", "__cxa_",
      "__cxxabiv1::",   "_Unwind_",
      "std::terminate", "__gnu_cxx::__verbose_terminate_handler"};
  for (const char* p : runtime)
    if (starts(p)) return true;
  return false;
}

// One printable frame: a machine-code function (`offset` set) or a
// function inlined into it.
struct frame {
  std::string name;  // func_print_name's form
  std::string base;  // func_base_name's form, for hidden()
  std::string file;
  int line = 0;
  std::string object;
  std::uintptr_t offset = 0;
  bool inlined = false;
  std::string decl_file;  // where the function is declared, if known
  int decl_line = 0;
};

// The frames at pc, innermost first: the functions inlined there, then the
// one that holds them.
void frames_at(std::uintptr_t pc, std::vector<frame>* out, bool* scoped) {
  symbol_info s = symbolize(pc, true);
  *scoped = s.have_scopes;
  for (const inlined_frame& f : s.inlined)
    out->push_back({func_print_name(f.function, f.decl_file, f.decl_line),
                    func_base_name(f.function), f.file, f.line, "", 0, true,
                    f.decl_file, f.decl_line});
  out->push_back({s.function.empty()
                      ? "?"
                      : func_print_name(s.function, s.decl_file, s.decl_line),
                  func_base_name(s.function), s.file, s.line, s.object,
                  s.offset, false, s.decl_file, s.decl_line});
}

void append_frame(std::string& out, const frame& f, bool created_by,
                  const char* note = nullptr) {
  if (created_by) out += "created by ";
  out += f.name;
  if (!created_by) out += "(...)";
  out += "\n\t";
  // Go's "\t/path/file.go:123 +0x45" (an inlined frame has no pc of its
  // own: no offset); the object's path without DWARF.
  if (!f.file.empty()) {
    out += f.file;
    out += ':';
    out += std::to_string(f.line);
  } else {
    out += f.object.empty() ? "?" : f.object;
  }
  if (note != nullptr) {
    out += note;
  } else if (!f.inlined) {
    char off[32];
    std::snprintf(off, sizeof off, " +0x%zx",
                  static_cast<std::size_t>(f.offset));
    out += off;
  }
  out += '\n';
}

// The frames of pcs (innermost first), without the hidden ones, then the
// goroutine's own function (G.startpc) if no frame was it: a function that
// ends in a call may leave by a tail call (jmp), and the goroutine's first
// frame is then the closure's entry, which is hidden.
void append_frames(std::string& out, const std::uintptr_t* pcs, int n,
                   const void* startpc) {
  std::string start_name;
  frame start;
  if (startpc != nullptr) {
    std::vector<frame> fs;
    bool scoped = false;
    frames_at(reinterpret_cast<std::uintptr_t>(startpc), &fs, &scoped);
    start = fs.back();
    if (!start.base.empty() && !hidden(start.base, true))
      start_name = func_print_name(start.base, "", 0);
  }
  // A frame is the goroutine's function if it is declared where that is
  // (the linkage name of an inlined lambda is not known), else by name.
  auto is_start = [&](const frame& f) {
    if (!start.decl_file.empty() && !f.decl_file.empty())
      return f.decl_file == start.decl_file && f.decl_line == start.decl_line;
    return func_print_name(f.base, "", 0) == start_name;
  };
  bool seen = false;
  std::vector<frame> fs;
  for (int i = 0; i < n; i++) {
    fs.clear();
    bool scoped = false;
    frames_at(pcs[i], &fs, &scoped);
    for (const frame& f : fs) {
      if (!start_name.empty() && is_start(f)) seen = true;
      if (!f.base.empty() && hidden(f.base, scoped)) continue;
      append_frame(out, f, false);
    }
  }
  // (With no frames at all, not started yet or its stack unavailable: the
  // function it runs, as Go prints a goroutine that has not run.)
  if (!start_name.empty() && !seen) {
    // Its declaration's line (a lambda's), not its first instruction's,
    // which may be code inlined from a header.
    if (!start.decl_file.empty() && start.decl_line > 0) {
      start.file = start.decl_file;
      start.line = start.decl_line;
    }
    start.inlined = n == 0;  // no offset: not a pc of the goroutine's
    append_frame(out, start, false,
                 n == 0 ? nullptr
                        : " (the goroutine's function; not on the stack: "
                          "it left by a tail call)");
  }
}

// "created by F in goroutine N": the innermost frame at the spawn that is
// neither goro::go itself nor hidden; none for goroutines the runtime
// starts (goroutine 1, which goro::run starts, as Go's main goroutine).
void append_created_by(std::string& out, G* gp) {
  if (gp->gopc == nullptr) return;
  std::vector<frame> fs;
  bool scoped = false;
  frames_at(reinterpret_cast<std::uintptr_t>(gp->gopc) - 1, &fs, &scoped);
  for (const frame& f : fs) {
    if (f.base.empty() || f.base.compare(0, 9, "goro::go<") == 0 ||
        hidden(f.base, scoped))
      continue;
    std::string created;
    append_frame(created, f, true);
    char in[48];
    std::snprintf(in, sizeof in, " in goroutine %llu",
                  static_cast<unsigned long long>(gp->parent_goid));
    if (gp->parent_goid != 0) created.insert(created.find('\n'), in);
    out += created;
    return;
  }
}

// A goroutine running (or in a blocking call) on another thread: its frames
// from that thread, interrupted by the preemption signal
// (signal_traceback), within 100 ms. Under TSan the handler is never
// installed (TSan defers asynchronous signals to its own safe points and
// gives the handler a copy of the context), so such goroutines keep the
// "stack unavailable" line.
bool interrupted_frames(G* gp, pc_buf* b) {
#ifdef GORO_HAVE_TSAN
  (void)gp;
  (void)b;
  return false;
#else
  M* mp = gp->m;
  if (mp == nullptr || mp->curg.load(std::memory_order_relaxed) != gp)
    return false;
  int n = signal_traceback(mp, gp, b->pcs, max_frames, 100 * 1000 * 1000);
  if (n <= 0) return false;
  b->n = n;
  return true;
#endif
}

// given: frames already collected (a panic's, from where it was thrown;
// n may be 0), printed instead of unwinding the goroutine now.
void append_goroutine(std::string& out, G* gp, G* self, bool interrupt,
                      const pc_buf* given = nullptr,
                      const char* note = nullptr) {
  std::uint32_t st = readgstatus(gp);
  char head[200];
  wait_reason why = gp->waitreason.load(std::memory_order_relaxed);
  const char* what = st == g_waiting && why != wait_reason::zero
                         ? wait_reason_string(why)
                         : gstatus_string(st);
  // How long it has been parked, in whole minutes, from a minute on (Go
  // prints "1 minutes" too). waitsince is the coarse clock at gopark.
  char waited[40] = "";
  std::int64_t since = gp->waitsince.load(std::memory_order_relaxed);
  if (st == g_waiting && since != 0) {
    std::int64_t minutes = (coarse_clock_exact() - since) / 60;
    if (minutes >= 1)
      std::snprintf(waited, sizeof waited, ", %lld minutes",
                    static_cast<long long>(minutes));
  }
  std::snprintf(head, sizeof head, "goroutine %llu [%s%s%s]:\n",
                static_cast<unsigned long long>(gp->goid), what, waited,
                gp->lockedm != nullptr ? ", locked to thread" : "");
  out += head;
  if (note != nullptr) out += note;
  pc_buf b;
  if (given != nullptr) {
    b = *given;
  } else if (gp == self) {
    collect_here(&b);
  } else if ((st == g_waiting || st == g_runnable) && gp->sched_sp != nullptr) {
    if (!switched_out_frames(gp, &b))
      out += "\tgoroutine resumed during the dump; stack unavailable\n";
  } else if (st == g_runnable) {
    // Queued without a stack: it has not run yet (newproc.cpp).
    out += "\tgoroutine not started yet\n";
  } else if (st == g_running || st == g_syscall) {
    if (!interrupt || !interrupted_frames(gp, &b))
      out += "\tgoroutine running on other thread; stack unavailable\n";
  }
  // (A stack cut short holds the goroutine's function further out.)
  bool cut = b.truncated || b.n > max_frames;
  append_frames(out, b.pcs, b.n < max_frames ? b.n : max_frames,
                cut ? nullptr : gp->startpc);
  if (cut) out += "...additional frames elided...\n";
  append_created_by(out, gp);
}

struct all_ctx {
  std::string* out;
  G* self;
  bool interrupt;
};

void append_other(G* gp, void* arg) {
  auto* c = static_cast<all_ctx*>(arg);
  if (gp == c->self || readgstatus(gp) == g_dead) return;
  *c->out += "\n";
  append_goroutine(*c->out, gp, c->self, c->interrupt);
}

std::atomic<bool> sigquit_pending{false};

void sigquit_handler(int, siginfo_t*, void*) {
  // Async-signal-safe: a flag and a futex wake-up; sysmon does the dump.
  sigquit_pending.store(true);
  sysmon_wake_if_waiting();
}

}  // namespace

std::string goroutine_trace(G* gp) {
  std::string out;
  append_goroutine(out, gp, getg(), false);
  return out;
}

std::string goroutine_trace_at(G* gp, const std::uintptr_t* pcs, int n,
                               bool truncated, const char* note) {
  pc_buf b;
  for (int i = 0; i < n && i < max_frames; i++) b.pcs[b.n++] = pcs[i];
  // More frames than shown: append_goroutine's "elided" line, and no
  // goroutine function looked for among the top ones.
  b.truncated = truncated || n > max_frames;
  std::string out;
  append_goroutine(out, gp, getg(), false, &b, note);
  return out;
}

std::string running_goroutine_trace(G* gp) {
  std::string out;
  append_goroutine(out, gp, getg(), true);
  return out;
}

std::string all_goroutines_trace(bool interrupt) {
  std::string out;
  G* self = getg();
  if (self != nullptr) append_goroutine(out, self, self, false);
  all_ctx c{&out, self, interrupt};
  forallg(append_other, &c);
  if (!out.empty() && out[0] == '\n') out.erase(0, 1);
  return out;
}

int traceback_level(int fallback) {
  const char* v = std::getenv("GORO_TRACEBACK");
  if (v == nullptr || *v == 0) return fallback;
  if (std::strcmp(v, "none") == 0 || std::strcmp(v, "0") == 0) return 0;
  if (std::strcmp(v, "single") == 0 || std::strcmp(v, "1") == 0) return 1;
  if (std::strcmp(v, "all") == 0 || std::strcmp(v, "2") == 0) return 2;
  if (std::strcmp(v, "system") == 0 || std::strcmp(v, "crash") == 0) return 3;
  return fallback;
}

void print_fatal_traceback(int fallback) {
  int level = traceback_level(fallback);
  if (level == 0) return;
  std::string s;
  if (level == 1) {
    G* gp = getg();
    if (gp != nullptr) s = goroutine_trace(gp);
  } else {
    s = all_goroutines_trace(true);
  }
  if (s.empty()) return;
  s.insert(0, "\n");
  ssize_t r = goro::rt::sys::real().write(2, s.data(), s.size());
  (void)r;
}

void fatal_dump(const char* msg) {
  // One report: two Ms can reach the same verdict at once (seen under
  // TSan); the second waits for the first to exit the process.
  static std::atomic<bool> dying{false};
  if (dying.exchange(true)) {
    for (;;) pause();
  }
  flush_program_output();
  std::fprintf(stderr, "fatal error: %s\n", msg);
  std::fflush(stderr);
  print_fatal_traceback(2);
  _exit(2);
}

void sigquit_install() {
  struct sigaction sa {};
  sa.sa_sigaction = sigquit_handler;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  // Only if the program has not set its own handler (as Go, which leaves a
  // caller's SIGQUIT handler alone). An ignored SIGQUIT, inherited from
  // the parent (nohup, some process supervisors), is taken over: Go keeps
  // an inherited SIG_IGN only for SIGHUP and SIGINT.
  struct sigaction old {};
  if (sigaction(SIGQUIT, nullptr, &old) == 0 &&
      (old.sa_flags & SA_SIGINFO
           ? old.sa_sigaction == nullptr
           : old.sa_handler == SIG_DFL || old.sa_handler == SIG_IGN))
    sigaction(SIGQUIT, &sa, nullptr);
}

void sigquit_check() {
  if (!sigquit_pending.load(std::memory_order_relaxed)) return;
  // Best effort, as Go's: goroutines may still be running while we read
  // their stacks (switched-out ones are unwound from their saved context;
  // the process exits right after).
  std::string s = "SIGQUIT: quit\n\n" + all_goroutines_trace(true);
  flush_program_output();
  ssize_t r = goro::rt::sys::real().write(2, s.data(), s.size());
  (void)r;
  _exit(2);
}

}  // namespace goro::rt
