// proc.cpp: runtime start-up (Go's schedinit), goro::run and the runtime
// inspection API.
#include "runtime/proc.hpp"

#include <unistd.h>

#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/runtime.hpp>
#include <iostream>
#include <mutex>
#include <stdexcept>
#include <string>

#include "interpose/hook.hpp"
#include "runtime/asyncpreempt.hpp"
#include "runtime/checkdead.hpp"
#include "runtime/coarseclock.hpp"
#include "runtime/envparse.hpp"
#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/preempt.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/steal.hpp"
#include "runtime/stw.hpp"
#include "runtime/sysmon.hpp"
#include "runtime/tls.hpp"
#include "runtime/trace.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

schedt sched;
P** allp = nullptr;
std::atomic<std::int32_t> gomaxprocs_value{0};
pmask idlepmask;
pmask timerpmask;
std::atomic<bool> runtime_started{false};
debug_vars debug;
std::int64_t runtime_init_time = 0;

namespace {

// allp is sized once for up to this many Ps (GOMAXPROCS can be large in
// Go, e.g. TestBigGOMAXPROCS uses 1024).
constexpr std::int32_t max_procs = 1024;

// GORO_DEBUG's keys and the fields they set; another key is one more row.
constexpr struct {
  const char* name;
  int debug_vars::*field;
} debug_keys[] = {
    {"schedtrace", &debug_vars::schedtrace},
    {"scheddetail", &debug_vars::scheddetail},
    {"asyncpreempt", &debug_vars::asyncpreempt},
    {"asyncpreemptoff", &debug_vars::asyncpreemptoff},
    {"asyncpreemptsig", &debug_vars::asyncpreemptsig},
    {"asyncpreemptmain", &debug_vars::asyncpreemptmain},
    {"asyncpreemptmigrate", &debug_vars::asyncpreemptmigrate},
    {"oslockpark", &debug_vars::oslockpark},
    {"longrunning", &debug_vars::longrunning},
    {"blockedsyscall", &debug_vars::blockedsyscall},
    {"interpose", &debug_vars::interpose},
    {"blockedreport", &debug_vars::blockedreport},
    {"blockedfatal", &debug_vars::blockedfatal},
    {"stackrelease", &debug_vars::stackrelease},
};

void parse_debug() {
  const char* e = std::getenv("GORO_DEBUG");
  if (e == nullptr) return;
  // Comma-separated name=value pairs, as GODEBUG; unknown names are
  // ignored. A known name's value is decimal digits within int32 (no sign
  // or spaces); anything else is a fatal error, not read as some number.
  std::string s(e);
  std::size_t pos = 0;
  while (pos <= s.size()) {
    std::size_t end = s.find(',', pos);
    if (end == std::string::npos) end = s.size();
    std::string kv = s.substr(pos, end - pos);
    std::size_t eq = kv.find('=');
    if (eq != std::string::npos) {
      std::string k = kv.substr(0, eq);
      for (const auto& key : debug_keys) {
        if (k != key.name) continue;
        const char* p = kv.c_str() + eq + 1;
        std::uint64_t v = 0;
        if (parse_digits(&p, &v) != num_parse::ok || *p != 0 || v > INT32_MAX)
          fatalf("GORO_DEBUG=%s: not a number in 0..%d", kv.c_str(), INT32_MAX);
        debug.*key.field = int(v);
      }
    }
    pos = end + 1;
  }
}

}  // namespace

int env_int(const char* name) {
  // As Go's atoi32 for GOMAXPROCS: decimal digits only (no sign, spaces or
  // suffix) and within int32; anything else, and 0, reads as unset (0), so
  // the caller uses its default.
  const char* e = std::getenv(name);
  if (e == nullptr || *e == 0) return 0;
  long long v = 0;
  for (const char* c = e; *c != 0; c++) {
    if (*c < '0' || *c > '9') return 0;
    v = v * 10 + (*c - '0');
    if (v > INT32_MAX) return 0;
  }
  return int(v);
}

void schedinit(const goro::options* opt) {
  runtime_init_time = nanotime();
  parse_debug();
  int procs = opt && opt->gomaxprocs > 0 ? opt->gomaxprocs : 0;
  if (procs == 0) procs = env_int("GOMAXPROCS");
  if (procs == 0) procs = default_gomaxprocs();
  if (procs > max_procs) procs = max_procs;

  stackinit(opt ? opt->stack_size : 0, opt ? int(opt->guard) : 0);
  install_overflow_handler();
  timeslice_init(opt ? opt->time_slice.count() : 0);
  asyncpreempt_init();

  allp = new P*[max_procs]();
  idlepmask.words = new std::atomic<std::uint32_t>[max_procs / 32]();
  timerpmask.words = new std::atomic<std::uint32_t>[max_procs / 32]();
  netpollinit();
  interpose::init(debug.interpose != 0);
  sigquit_install();
  sched.last_poll.store(nanotime());
  coarse_clock_update();
  for (int i = 0; i < procs; i++) {
    allp[i] = new P;
    allp[i]->id = i;
  }
  steal_order.reset(std::uint32_t(procs));
  gomaxprocs_value.store(procs);
  {
    lock_guard lk(sched.lock);
    for (int i = procs - 1; i >= 0; i--) pidleput(allp[i]);
  }
  trace_env_start();  // GORO_TRACE=<file>
  sysmon_start();
}

void flush_program_output() {
  std::fflush(nullptr);
  // std::cout and std::clog keep buffers of their own once the program
  // calls std::ios::sync_with_stdio(false).
  std::cout.flush();
  std::clog.flush();
}

void fatal(const char* msg) {
  flush_program_output();
  std::fprintf(stderr, "fatal error: %s\n", msg);
  M* mp = getm();
  if (G* gp = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr)
    std::fprintf(stderr, "\ngoroutine %llu [running]:\n",
                 static_cast<unsigned long long>(gp->goid));
  std::fflush(stderr);
  _exit(2);
}

void fatalf(const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fatal(buf);
}

}  // namespace goro::rt

namespace goro::detail {

namespace {

std::string stack_size_text(std::size_t n) {
  return std::to_string(n) + (n % 1024 == 0 && n >= 1024
                                  ? " (" + std::to_string(n / 1024) + " KiB)"
                                  : std::string());
}

// stackinit and resolve_guard take a stack_guard as a guard_kind.
static_assert(int(stack_guard::automatic) == int(rt::guard_kind::none) &&
              int(stack_guard::madvise) == int(rt::guard_kind::madvise) &&
              int(stack_guard::mprotect) == int(rt::guard_kind::mprotect) &&
              int(stack_guard::canary) == int(rt::guard_kind::canary));

// Throws std::invalid_argument for options no runtime can start with.
void validate(const options& o) {
  if (o.stack_size != 0)
    if (const char* why = rt::stack_size_problem(o.stack_size))
      throw std::invalid_argument("goro::options::stack_size = " +
                                  stack_size_text(o.stack_size) + ": " + why);
  if (o.time_slice.count() != 0)
    if (const char* why = rt::time_slice_problem(o.time_slice.count()))
      throw std::invalid_argument("goro::options::time_slice = " +
                                  std::to_string(o.time_slice.count()) +
                                  "ns: " + why);
  if (unsigned(o.guard) > unsigned(stack_guard::canary))
    throw std::invalid_argument(
        "goro::options::guard = " + std::to_string(int(o.guard)) +
        ": not a goro::stack_guard value");
}

// Starts the runtime with `opt` unless it is running; true if this call
// started it.
bool start(const options* opt) {
  static std::mutex start_mu;
  if (rt::runtime_started.load(std::memory_order_acquire)) return false;
  std::lock_guard<std::mutex> lk(start_mu);
  if (rt::runtime_started.load(std::memory_order_relaxed)) return false;
  rt::schedinit(opt);
  rt::runtime_started.store(true, std::memory_order_release);
  return true;
}

// Options for a runtime that is already running (started by an earlier run
// or lazily by go(), a channel, a timer...). The P count can change at run
// time, so options::gomaxprocs applies as gomaxprocs(n). The stack size and
// guard cannot: an explicit value other than the running one throws; 0 and
// stack_guard::automatic, or the values in force, are fine.
void apply_to_running(const options& o) {
  if (o.stack_size != 0) {
    std::size_t want =
        (o.stack_size + rt::page_size - 1) / rt::page_size * rt::page_size;
    if (want != rt::default_stack_size())
      throw std::invalid_argument(
          "goro::options::stack_size = " + stack_size_text(o.stack_size) +
          " cannot apply: the runtime is already running with " +
          stack_size_text(rt::default_stack_size()) +
          " stacks (options apply when the runtime starts; use "
          "goro::go_options{.stack_size} per goroutine)");
  }
  if (o.guard != stack_guard::automatic &&
      rt::resolve_guard(int(o.guard)) != rt::default_guard())
    throw std::invalid_argument(
        std::string("goro::options::guard = ") +
        rt::guard_name(rt::guard_kind(int(o.guard))) +
        " cannot apply: the runtime is already running with " +
        rt::guard_name(rt::default_guard()) +
        " guards (options apply when the runtime starts)");
  if (o.time_slice.count() != 0) rt::time_slice_ns.store(o.time_slice.count());
  if (o.gomaxprocs > 0) {
    int n = o.gomaxprocs < rt::max_procs ? o.gomaxprocs : rt::max_procs;
    if (n != rt::gomaxprocs_now()) gomaxprocs(n);
  }
}

}  // namespace

void ensure_started(const options* opt) {
  if (rt::runtime_started.load(std::memory_order_acquire)) return;
  if (opt != nullptr) validate(*opt);
  start(opt);
}

int run_main(const options* opt, std::function<int()> main_fn,
             const void* startpc) {
  if (rt::getg() != nullptr)
    throw std::logic_error("goro::run called from inside a goroutine");
  validate(*opt);
  if (!start(opt)) apply_to_running(*opt);
  struct state {
    std::function<int()> fn;
    int result = 0;
    rt::note done;
  } st;
  st.fn = std::move(main_fn);
  auto body = [&st] {
    // If main_fn calls goexit, run() never returns: as in Go, the other
    // goroutines go on, and when none is left that is reported.
    struct goexit_watch {
      bool returned = false;
      ~goexit_watch() {
        if (!returned) rt::sched.main_goexited.store(true);
      }
    } watch;
    st.result = st.fn();
    watch.returned = true;
    rt::thread_unpark(st.done);
  };
  // goro::go's steps, with the program's function as the goroutine's
  // startpc: dumps name it for goroutine 1, not this wrapper.
  using C = closure<decltype(body)>;
  spawn_slot slot = newproc_prepare(0, sizeof(C), alignof(C));
  ::new (slot.storage) C{body};
  // Armed before goroutine 1 can run (and block): deadlock detection must
  // see the run. A sysmon already in its deep idle sleep computed that
  // sleep as a minute, with no run active: wake it, so that it re-checks
  // every 100 ms from now on. Both sides are seq_cst (Dekker with
  // sysmonwait): either sysmon's later load sees main_active, or this
  // load sees sysmonwait and wakes it.
  rt::sched.main_active.fetch_add(1);
  rt::sysmon_wake_if_waiting();
  newproc_commit(slot, &C::entry, startpc);
  rt::thread_park(st.done);
  rt::sched.main_active.fetch_sub(1);
  rt::trace_env_stop();  // GORO_TRACE's file is written when run returns
  return st.result;
}

}  // namespace goro::detail

namespace goro {

namespace {
constexpr int max_procs_public = 1024;
}  // namespace

int gomaxprocs(int n) {
  // As Go's runtime.GOMAXPROCS, any n < 1 only queries.
  if (n < 1) n = 0;
  if (n > max_procs_public) n = max_procs_public;
  if (!rt::runtime_started.load(std::memory_order_acquire)) {
    if (n == 0) {
      detail::ensure_started(nullptr);
      return rt::gomaxprocs_now();
    }
    // The previous setting is what the runtime would have started with.
    int prev = rt::env_int("GOMAXPROCS");
    if (prev < 1) prev = rt::default_gomaxprocs();
    if (prev > max_procs_public) prev = max_procs_public;
    options o;
    o.gomaxprocs = n;
    // Not started yet: start it with n Ps (unless another thread wins
    // the race to start it; then the checks below apply).
    detail::ensure_started(&o);
    if (rt::gomaxprocs_now() == n) return prev;
  }
  int cur = rt::gomaxprocs_now();
  if (n == 0 || n == cur) return cur;
  // Stop the world, resize (Go's procresize: run queues, timers and G
  // caches of removed Ps move, nothing is lost), start it again.
  rt::stop_the_world();
  cur = rt::gomaxprocs_now();
  rt::start_the_world(n);
  return cur;
}

int num_cpu() { return rt::usable_cpus(); }

std::int64_t num_goroutine() {
  if (!rt::runtime_started.load(std::memory_order_acquire)) return 0;
  std::int64_t n = rt::sched.ngoroutines_extra.load(std::memory_order_relaxed);
  for (int i = 0; i < 1024 && rt::allp[i] != nullptr; i++)
    n += rt::allp[i]->ngoroutines.load(std::memory_order_relaxed);
  return n;
}

std::uint64_t goroutine_id() {
  rt::G* gp = rt::getg();
  return gp ? gp->goid : 0;
}

void preempt_point() {
  rt::G* gp = rt::getg();
  if (gp != nullptr && gp->preempt.load(std::memory_order_relaxed))
    rt::gopreempt();
}

namespace detail {

void preempt_disable() noexcept {
  if (rt::G* gp = rt::getg())
    gp->preempt_off.store(gp->preempt_off.load(std::memory_order_relaxed) + 1,
                          std::memory_order_relaxed);
}

void preempt_enable() noexcept {
  rt::G* gp = rt::getg();
  if (gp == nullptr) return;
  std::int32_t n = gp->preempt_off.load(std::memory_order_relaxed) - 1;
  gp->preempt_off.store(n, std::memory_order_relaxed);
  // A preemption asked for inside the guard happens now (as Go's
  // releasem): the time slice is over.
  if (n == 0 && gp->preempt.load(std::memory_order_relaxed)) rt::gopreempt();
}

}  // namespace detail

}  // namespace goro
