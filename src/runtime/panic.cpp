// panic.cpp: an exception that escapes a goroutine (Go's unrecovered
// panic): its report shows the stack it was thrown from.
//
// The goroutine's function runs under goro_gcall (context_amd64.S), a
// frame whose personality routine is goro_gcall_personality below. The
// unwinder's search phase asks each frame from the throw outwards whether
// it catches; only an exception that none catches asks goro_gcall's, and
// at that moment the frames it was thrown from are still on the stack
// (the search phase only reads them): they are recorded then. Throwing and
// catching below costs nothing more. The cleanup phase then runs the
// destructors as before and lands at goro_gcall_land, which reports and
// exits 2. goexit's forced unwinding lands there too, and ends the
// goroutine.
#include "runtime/panic.hpp"

#include <cxxabi.h>
#include <unistd.h>
#include <unwind.h>

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>
#include <typeinfo>
#include <vector>

#include "runtime/g.hpp"
#include "runtime/tls.hpp"
#include "runtime/traceback.hpp"

extern "C" char goro_gcall_land[];

namespace goro::rt {

namespace {

constexpr int panic_frames = 64;

// Stacks recorded at the search phase, by goroutine, until it lands (a
// goroutine's destructors may block and resume it on another thread, so
// not thread-local; the first to land ends the process).
struct thrown_at {
  G* gp;
  std::uintptr_t pcs[panic_frames];
  int n;
};
std::mutex thrown_mu;
std::vector<thrown_at>* thrown = nullptr;

_Unwind_Reason_Code record_one(struct _Unwind_Context* ctx, void* arg) {
  auto* t = static_cast<thrown_at*>(arg);
  int before = 0;
  std::uintptr_t pc = _Unwind_GetIPInfo(ctx, &before);
  if (pc == 0) return _URC_END_OF_STACK;
  if (!before) pc--;  // a return address: look up the call
  t->pcs[t->n++] = pc;
  return t->n >= panic_frames ? _URC_END_OF_STACK : _URC_NO_REASON;
}

void record_throw(G* gp) {
  thrown_at t{gp, {}, 0};
  // From here: this routine, the unwinder, __cxa_throw, then the
  // program's frames (the dump hides the first three kinds).
  _Unwind_Backtrace(record_one, &t);
  std::lock_guard<std::mutex> lk(thrown_mu);
  if (thrown == nullptr) thrown = new std::vector<thrown_at>;
  for (thrown_at& old : *thrown)
    if (old.gp == gp) {
      old = t;
      return;
    }
  thrown->push_back(t);
}

std::string demangle(const char* name) {
  int status = 0;
  char* d = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  std::string s = (status == 0 && d) ? d : name;
  std::free(d);
  return s;
}

// The exception is caught (landed): Go's panic report, and exit 2.
[[noreturn]] void panic_exit(G* gp) {
  std::string what, type;
  try {
    throw;
  } catch (const std::exception& e) {
    what = e.what();
    type = demangle(typeid(e).name());
  } catch (...) {
    std::type_info* t = abi::__cxa_current_exception_type();
    type = t ? demangle(t->name()) : "unknown";
    what = "exception of type " + type;
  }
  thrown_at t{gp, {}, 0};
  {
    std::lock_guard<std::mutex> lk(thrown_mu);
    if (thrown != nullptr)
      for (thrown_at& old : *thrown)
        if (old.gp == gp) t = old;
  }
  std::string note =
      "\t(uncaught exception of type " + type + " escaped the goroutine)\n";
  std::string trace =
      goroutine_trace_at(gp, t.pcs, t.n, t.n >= panic_frames, note.c_str());
  flush_program_output();
  std::fprintf(stderr, "panic: %s\n\n%s", what.c_str(), trace.c_str());
  std::fflush(stderr);
  _exit(2);
}

}  // namespace

}  // namespace goro::rt

// The personality routine of goro_gcall's frame (the goroutine's first).
extern "C" __attribute__((visibility("hidden"))) _Unwind_Reason_Code
goro_gcall_personality(int version, _Unwind_Action actions,
                       _Unwind_Exception_Class, _Unwind_Exception* exc,
                       struct _Unwind_Context* ctx) {
  using namespace goro::rt;
  if (version != 1) return _URC_FATAL_PHASE1_ERROR;
  if (actions & _UA_SEARCH_PHASE) {
    // Nothing below catches it: it escapes the goroutine.
    if (G* gp = getg()) record_throw(gp);
    return _URC_HANDLER_FOUND;
  }
  // Cleanup phase at this frame: after a search that stopped here
  // (_UA_HANDLER_FRAME) or forced (goexit): land it.
  _Unwind_SetGR(ctx, __builtin_eh_return_data_regno(0),
                reinterpret_cast<_Unwind_Word>(exc));
  _Unwind_SetIP(ctx, reinterpret_cast<_Unwind_Ptr>(goro_gcall_land));
  return _URC_INSTALL_CONTEXT;
}

// goro_gcall_land: an exception or goexit's unwinding left the
// goroutine's function.
extern "C" [[noreturn]] __attribute__((visibility("hidden"))) void
goro_gcall_landed(_Unwind_Exception* exc) {
  using namespace goro::rt;
  G* gp = getg();
  goexit_landed(gp, exc);
  // A C++ exception (or a foreign one): handle it as a catch(...) would.
  abi::__cxa_begin_catch(exc);
  panic_exit(gp);
}
