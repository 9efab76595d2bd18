// debuginfo.cpp: what a debugger needs to find goroutines without running
// code in the process (Go exports sizes and offsets for runtime-gdb.py the
// same way). tools/gdb/goro-gdb.py reads `goro_debug_layout`, a table of
// (name, value) pairs ended by a null name, from memory: in a live process
// and in a core file alike, and from Release or stripped-but-symbolized
// builds that carry no DWARF types. Layouts change as fields are added to
// G and M; the script looks every offset up here by name, so only a
// change of meaning (or of a field's width, see the static_asserts) needs
// a new version and a script that knows it.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "runtime/g.hpp"
#include "runtime/m.hpp"

namespace goro::rt {

// Every G ever created, newest first (Go's allgs); guarded by allglock in
// g.cpp. Defined here so that linking the runtime links the table below.
G* allgs = nullptr;

namespace {

// Go's names for wait reasons and statuses, indexed by value, filled
// before main from the runtime's own string functions (so a reason added
// to g.cpp shows up here without an edit). Static storage: a core file
// holds them.
constexpr int max_names = 256;
const char* wait_reason_names[max_names];
std::uint64_t wait_reason_count = 0;
const char* gstatus_names[16];
std::uint64_t gstatus_count = 0;

[[gnu::constructor]] void fill_names() {
  for (int i = 0; i < max_names; i++) {
    const char* s = wait_reason_string(static_cast<wait_reason>(i));
    if (i > 0 && std::strcmp(s, "???") == 0) break;
    wait_reason_names[i] = s;
    wait_reason_count = static_cast<std::uint64_t>(i) + 1;
  }
  for (int i = 0; i < 16; i++) {
    gstatus_names[i] = gstatus_string(static_cast<std::uint32_t>(i));
    gstatus_count = static_cast<std::uint64_t>(i) + 1;
  }
}

// The script reads these fields with these widths (layout version 1).
static_assert(sizeof(G::goid) == 8 && sizeof(G::parent_goid) == 8);
static_assert(sizeof(G::atomicstatus) == 4 && sizeof(G::waitreason) == 1);
static_assert(sizeof(G::syscall_depth) == 4 && sizeof(M::procid) == 4);
static_assert(sizeof(G::sched_sp) == 8 && sizeof(G::gopc) == 8);

}  // namespace
}  // namespace goro::rt

extern "C" {

// asyncpreempt_amd64.S: where a signal-preempted goroutine resumes.
void goro_async_resume();

struct goro_debug_entry {
  const char* name;
  std::uint64_t value;
};

// offsetof on G and M: both are plain aggregates of scalars and atomics,
// but GCC calls std::atomic members "non-standard-layout" on some versions.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winvalid-offsetof"

#define GORO_OFF(prefix, T, field) \
  { prefix #field, offsetof(goro::rt::T, field) }

// used + retain: kept by the compiler and by --gc-sections although
// nothing in the program reads it. Exported (default visibility) so that
// it is in libgoro.so's dynamic symbol table too.
#define GORO_DEBUGGER_TABLE __attribute__((used, retain, visibility("default")))
GORO_DEBUGGER_TABLE extern const goro_debug_entry goro_debug_layout[] = {
    {"magic", 0x676f726f64626731},  // "gorodbg1"
    {"version", 1},
    {"allgs", reinterpret_cast<std::uintptr_t>(&goro::rt::allgs)},
    {"g.size", sizeof(goro::rt::G)},
    GORO_OFF("g.", G, sched_sp),
    GORO_OFF("g.", G, atomicstatus),
    GORO_OFF("g.", G, syscall_depth),
    GORO_OFF("g.", G, goid),
    GORO_OFF("g.", G, m),
    GORO_OFF("g.", G, lockedm),
    {"g.stack_lo", offsetof(goro::rt::G, stk) + offsetof(goro::rt::stack, lo)},
    {"g.stack_hi", offsetof(goro::rt::G, stk) + offsetof(goro::rt::stack, hi)},
    GORO_OFF("g.", G, waitreason),
    GORO_OFF("g.", G, entry),
    GORO_OFF("g.", G, parent_goid),
    GORO_OFF("g.", G, gopc),
    GORO_OFF("g.", G, startpc),
    GORO_OFF("g.", G, alllink),
    GORO_OFF("m.", M, procid),
    GORO_OFF("m.", M, curg),
    {"wait_reason_names",
     reinterpret_cast<std::uintptr_t>(&goro::rt::wait_reason_names)},
    {"wait_reason_count",
     reinterpret_cast<std::uintptr_t>(&goro::rt::wait_reason_count)},
    {"gstatus_names",
     reinterpret_cast<std::uintptr_t>(&goro::rt::gstatus_names)},
    {"gstatus_count",
     reinterpret_cast<std::uintptr_t>(&goro::rt::gstatus_count)},
    // The frame goro_mcall leaves at G.sched_sp (context_amd64.S,
    // prepare_stack): [mxcsr|fcw][r15][r14][r13][r12][rbx][rbp][ret]; the
    // caller's stack pointer is sched_sp + frame.size.
    {"frame.size", 64},
    {"frame.r15", 8},
    {"frame.r14", 16},
    {"frame.r13", 24},
    {"frame.r12", 32},
    {"frame.rbx", 40},
    {"frame.rbp", 48},
    {"frame.ret", 56},
    // A goroutine preempted by signal (asyncpreempt.cpp) saved a frame
    // whose return address is goro_async_resume+1 and whose rbx points at
    // its async_ctx: rax, rbx, rcx, rdx, rsi, rbp, r8-r15 at 0-104, then
    // the address S-152 of three slots (rdi, rflags, rip), S being the
    // interrupted stack pointer (the offsets asyncpreempt_amd64.S uses).
    {"async.resume_pc",
     reinterpret_cast<std::uintptr_t>(&goro_async_resume) + 1},
    {"async.rax", 0},
    {"async.rbx", 8},
    {"async.rcx", 16},
    {"async.rdx", 24},
    {"async.rsi", 32},
    {"async.rbp", 40},
    {"async.r8", 48},
    {"async.r9", 56},
    {"async.r10", 64},
    {"async.r11", 72},
    {"async.r12", 80},
    {"async.r13", 88},
    {"async.r14", 96},
    {"async.r15", 104},
    {"async.slots", 112},
    {"async.slot_rdi", 0},
    {"async.slot_rip", 16},
    {"async.slots_to_sp", 152},
    {nullptr, 0},
};

#undef GORO_OFF
#undef GORO_DEBUGGER_TABLE
#pragma GCC diagnostic pop
}
