# goro-gdb.py: gdb commands for goro's goroutines (Go's runtime-gdb.py for
# goro), in a live process and in a core file.
#
#   (gdb) source /usr/share/goro/gdb/goro-gdb.py
#   (gdb) info goroutines
#   (gdb) goroutine 7 bt
#   (gdb) goroutine all bt
#   (gdb) goroutine 7 info locals      # any command, in the goroutine's
#                                      # innermost frame
#
# How it works (x86-64 only, as goro's context switch):
#  - The runtime exports `goro_debug_layout` (src/runtime/debuginfo.cpp), a
#    table of (name, value) pairs: the address of allgs, G's and M's field
#    offsets, the wait reason names and the saved-context frame layout.
#    The script reads that table and the Gs from memory, so it needs no
#    DWARF types (Release and stripped-but-symbolized programs work) and
#    never runs code in the inferior (core files work).
#  - A parked goroutine's context is the frame goro_mcall left at
#    G.sched_sp: [mxcsr|fcw][r15][r14][r13][r12][rbx][rbp][return address].
#    Registers cannot be written in a core file, so instead of setting
#    $rsp/$rip as Go's script does, a frame unwinder (gdb.unwinder) that is
#    active only while a command runs says that the selected thread's
#    innermost frame was "called" from that saved context. gdb's own DWARF
#    unwinder then walks the goroutine's stack from there, so its frames
#    come with names, file:line, arguments and locals as in any backtrace.
#    The thread's real frame #0 is left out of what is printed.
#  - A running goroutine (or one in a blocking call) is on a thread: its
#    frames are that thread's (found through G.m -> M.procid, the LWP).
#
# Loaded twice (auto-load and `source`), it replaces its earlier commands.

import re
import struct

import gdb
import gdb.unwinder

# "goro.private.": goro's own copies of inline functions and templates in
# the static library (cmake/goro_text.cmake renames them).
_HIDDEN_PREFIXES = ("goro::", "goro_", "goro.private.", "std::",
                    "__interceptor_",
                    "__sanitizer", "__tsan", "__asan", "__ubsan")


_RETURN_TYPE = re.compile(r"^(?:(?:unsigned|signed|const|long|short) )*"
                          r"[\w:]+[ *&]+")

_SYSTEM_LIBS = ("libc.", "libc-", "libpthread", "libstdc++", "libgcc_s",
                "ld-linux", "libm.", "libgoro.", "libasan", "libtsan",
                "libubsan", "liblsan")


def _hidden(frame):
    """Frames left out of 'where', which names the user's innermost frame:
    goro's runtime and API (goro::chan<int>::recv, goro::sleep: the wait
    reason says as much; goro::detail::closure may hold the user's inlined
    code, so it stays), the standard library's call plumbing, and the C
    and C++ runtime libraries (a goroutine stopped in raise() is "at" its
    caller). `goroutine N bt` shows every frame."""
    name = frame.name()
    if name is None:
        return True
    if name.startswith("goro::detail::closure<"):
        return False
    if name.startswith(_HIDDEN_PREFIXES):
        return True
    # A function template's demangled name starts with its return type
    # ("unsigned long goro::select<...>(...)").
    m = _RETURN_TYPE.match(name)
    if m and name[m.end():].startswith(_HIDDEN_PREFIXES):
        return True
    lib = gdb.solib_name(frame.pc())
    return lib is not None and lib.rsplit("/", 1)[-1].startswith(_SYSTEM_LIBS)


class _Layout:
    """goro_debug_layout, read from the inferior."""

    MAGIC = 0x676F726F64626731
    VERSION = 1

    def __init__(self):
        try:
            addr = int(gdb.parse_and_eval("(unsigned long)&goro_debug_layout"))
        except gdb.error:
            raise gdb.GdbError(
                "goro: no symbol goro_debug_layout in this program: it does not "
                "use goro, or its libgoro predates the gdb extension (or the "
                "shared library is not loaded yet: start the program first)"
            )
        self.inf = gdb.selected_inferior()
        self.v = {}
        for i in range(256):
            name_p, value = struct.unpack("<QQ", self.read(addr + 16 * i, 16))
            if name_p == 0:
                break
            self.v[self.cstr(name_p)] = value
        if self.v.get("magic") != self.MAGIC:
            raise gdb.GdbError("goro: goro_debug_layout is not goro's table")
        if self.v.get("version") != self.VERSION:
            raise gdb.GdbError(
                "goro: goro_debug_layout version %d, this script knows %d: use "
                "the goro-gdb.py installed with the program's libgoro"
                % (self.v.get("version"), self.VERSION)
            )
        self.wait_reasons = self.names("wait_reason_names", "wait_reason_count")
        self.gstatuses = self.names("gstatus_names", "gstatus_count")

    def read(self, addr, n):
        try:
            return bytes(self.inf.read_memory(addr, n))
        except gdb.MemoryError:
            raise gdb.GdbError("goro: cannot read %d bytes at %#x" % (n, addr))

    def u64(self, addr):
        return struct.unpack("<Q", self.read(addr, 8))[0]

    def cstr(self, addr, limit=256):
        out = b""
        while len(out) < limit:
            chunk = self.read(addr + len(out), 16)
            nul = chunk.find(b"\0")
            if nul >= 0:
                return (out + chunk[:nul]).decode("utf-8", "replace")
            out += chunk
        return out.decode("utf-8", "replace")

    def names(self, array_key, count_key):
        arr, n = self.v[array_key], self.u64(self.v[count_key])
        out = []
        for i in range(min(n, 256)):
            p = self.u64(arr + 8 * i)
            out.append(self.cstr(p) if p else "")
        return out


class _G:
    """One goroutine, decoded from its G record."""

    def __init__(self, lay, addr):
        self.addr = addr
        v = lay.v
        raw = lay.read(addr, v["g.size"])

        def q(key):
            return struct.unpack_from("<Q", raw, v[key])[0]

        def u32(key):
            return struct.unpack_from("<I", raw, v[key])[0]

        self.goid = q("g.goid")
        self.status = u32("g.atomicstatus")
        self.sched_sp = q("g.sched_sp")
        self.m = q("g.m")
        self.lockedm = q("g.lockedm")
        self.stack_lo = q("g.stack_lo")
        self.stack_hi = q("g.stack_hi")
        self.gopc = q("g.gopc")
        self.parent_goid = q("g.parent_goid")
        self.alllink = q("g.alllink")
        wr = raw[v["g.waitreason"]]
        self.status_name = (
            lay.gstatuses[self.status] if self.status < len(lay.gstatuses) else "???"
        )
        self.reason = lay.wait_reasons[wr] if wr < len(lay.wait_reasons) else "???"
        self.procid = 0
        if self.m and self.status_name in ("running", "syscall"):
            self.procid = struct.unpack("<i", lay.read(self.m + v["m.procid"], 4))[0]

    def on_thread(self):
        return self.status_name in ("running", "syscall")

    def parked(self):
        return self.status_name in ("waiting", "runnable") and self.sched_sp != 0


def _allgs(lay):
    """Every G that is not dead, by goroutine id."""
    out, seen = [], set()
    p = lay.u64(lay.v["allgs"])
    while p and p not in seen and len(seen) < 10_000_000:
        seen.add(p)
        g = _G(lay, p)
        if g.status_name != "dead":
            out.append(g)
        p = g.alllink
    out.sort(key=lambda g: g.goid)
    return out


class _SavedContextUnwinder(gdb.unwinder.Unwinder):
    """While `target` is set to (thread ptid, G): the selected thread's
    innermost frame unwinds to the goroutine's saved context."""

    def __init__(self):
        super().__init__("goro-goroutine")
        self.target = None

    def __call__(self, pending_frame):
        if self.target is None or pending_frame.level() != 0:
            return None
        ptid, lay, g = self.target
        if gdb.selected_thread() is None or gdb.selected_thread().ptid != ptid:
            return None
        v = lay.v
        sp = g.sched_sp

        def slot(key):
            return gdb.Value(lay.u64(sp + v[key])).cast(_ulong())

        # The frame ID of the thread's real frame: its own pc, and a stack
        # address of 0 so that gdb never finds the goroutine's frames (on
        # another stack, maybe below this one) "inner" to it.
        # (gdb 13 takes only gdb.Value here, not Python ints.)
        pc = pending_frame.read_register("rip")
        info = pending_frame.create_unwind_info(
            _FrameId(gdb.Value(0).cast(_ulong()), pc)
        )
        ret = lay.u64(sp + v["frame.ret"])
        if ret == v.get("async.resume_pc"):
            # Preempted by signal: the caller is the interrupted code, with
            # every register saved in the async_ctx that rbx points at.
            ctx = lay.u64(sp + v["frame.rbx"])
            slots = lay.u64(ctx + v["async.slots"])

            def at(addr):
                return gdb.Value(lay.u64(addr)).cast(_ulong())

            info.add_saved_register("rip", at(slots + v["async.slot_rip"]))
            info.add_saved_register("rdi", at(slots + v["async.slot_rdi"]))
            info.add_saved_register(
                "rsp", gdb.Value(slots + v["async.slots_to_sp"]).cast(_ulong())
            )
            for reg in ("rax", "rbx", "rcx", "rdx", "rsi", "rbp", "r8", "r9",
                        "r10", "r11", "r12", "r13", "r14", "r15"):
                info.add_saved_register(reg, at(ctx + v["async." + reg]))
            return info
        info.add_saved_register("rip", slot("frame.ret"))
        info.add_saved_register("rsp", gdb.Value(sp + v["frame.size"]).cast(_ulong()))
        for reg in ("rbp", "rbx", "r12", "r13", "r14", "r15"):
            info.add_saved_register(reg, slot("frame." + reg))
        return info


class _FrameId:
    def __init__(self, sp, pc):
        self.sp = sp
        self.pc = pc


def _ulong():
    return gdb.lookup_type("unsigned long")


def _unwinder():
    # One instance across reloads of this script (gdb keeps the registered
    # object; a reload replaces it).
    u = getattr(gdb, "_goro_unwinder", None)
    if u is None:
        u = _SavedContextUnwinder()
        gdb.unwinder.register_unwinder(None, u, replace=True)
        gdb._goro_unwinder = u
    return u


def _thread_of(g):
    for t in gdb.selected_inferior().threads():
        if t.ptid[1] == g.procid:
            return t
    return None


class _InGoroutine:
    """Context manager: frames of goroutine g become visible. For a parked
    one, gdb.newest_frame().older() is its innermost frame; for one on a
    thread, that thread is selected and its frame #0 is the goroutine's
    innermost. Restores the thread and frame selected before."""

    def __init__(self, lay, g):
        self.lay, self.g = lay, g

    def __enter__(self):
        self.thread = gdb.selected_thread()
        try:
            self.frame = gdb.selected_frame()
        except gdb.error:
            self.frame = None
        if self.thread is None:
            raise gdb.GdbError("goro: no thread (is the program running?)")
        g = self.g
        if g.on_thread():
            t = _thread_of(g)
            if t is None:
                raise gdb.GdbError(
                    "goro: goroutine %d is %s on LWP %d, which gdb does not list"
                    % (g.goid, g.status_name, g.procid)
                )
            t.switch()
            return gdb.newest_frame()
        if not g.parked():
            raise gdb.GdbError(
                "goro: goroutine %d is %s and has no saved context (it has not "
                "run yet)" % (g.goid, g.status_name)
            )
        u = _unwinder()
        u.target = (self.thread.ptid, self.lay, g)
        gdb.invalidate_cached_frames()
        first = gdb.newest_frame().older()
        if first is None:
            raise gdb.GdbError("goro: goroutine %d: cannot unwind its context" % g.goid)
        return first

    def __exit__(self, *exc):
        _unwinder().target = None
        gdb.invalidate_cached_frames()
        if self.thread is not None and self.thread.is_valid():
            self.thread.switch()
            if self.frame is not None:
                try:
                    self.frame.select()
                except gdb.error:
                    pass
        return False


def _frames(first, limit=200):
    f, out = first, []
    while f is not None and len(out) < limit:
        out.append(f)
        try:
            f = f.older()
        except gdb.error:
            break
    return out


def _where(f):
    name = f.name() or "??"
    sal = f.find_sal()
    if sal.symtab is not None and sal.line:
        return "%s at %s:%d" % (name, sal.symtab.filename, sal.line)
    return name


def _symbol(addr):
    """Function containing code address addr, demangled, or '??'."""
    try:
        s = gdb.execute("info symbol %#x" % addr, to_string=True).strip()
    except gdb.error:
        return "??"
    if s.startswith("No symbol"):
        return "??"
    for sep in (" + ", " in section "):
        if sep in s:
            s = s.split(sep, 1)[0]
    return s


class InfoGoroutines(gdb.Command):
    """List goro's goroutines: id, status, wait reason, where it is (its
innermost frame outside goro's runtime), the function that created it.
'*' marks goroutines running on a thread (status running or syscall)."""

    def __init__(self):
        super().__init__("info goroutines", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        lay = _Layout()
        for g in _allgs(lay):
            where = "?"
            try:
                if g.on_thread() or g.parked():
                    with _InGoroutine(lay, g) as first:
                        frames = _frames(first, 64)
                        user = [f for f in frames if not _hidden(f)]
                        where = _where(user[0] if user else frames[0])
                else:
                    where = "(not started)"
            except (gdb.GdbError, gdb.error) as e:
                where = "(%s)" % e
            reason = g.reason if g.status_name == "waiting" and g.reason else "-"
            line = "%s %-4d %-8s %-20s %s" % (
                "*" if g.on_thread() else " ",
                g.goid,
                g.status_name,
                "[" + reason + "]" if reason != "-" else "-",
                where,
            )
            if g.on_thread() and g.procid:
                line += " [LWP %d]" % g.procid
            if g.lockedm:
                line += " [locked to thread]"
            if g.gopc:
                line += ", created by %s" % _symbol(g.gopc - 1)
                if g.parent_goid:
                    line += " in goroutine %d" % g.parent_goid
            gdb.write(line + "\n")


class GoroutineCmd(gdb.Command):
    """goroutine <id>|all bt [N]: backtrace of a goroutine (parked ones
unwound from their saved context, running ones from their thread).
goroutine <id> <command>: runs a gdb command with the goroutine's innermost
frame selected (e.g. 'info locals', 'info frame', 'p $pc')."""

    def __init__(self):
        super().__init__("goroutine", gdb.COMMAND_STACK, gdb.COMPLETE_NONE)

    def invoke(self, arg, from_tty):
        parts = arg.split(None, 1)
        if len(parts) < 2:
            raise gdb.GdbError("usage: goroutine <id>|all <command> (e.g. bt)")
        which, cmd = parts
        lay = _Layout()
        gs = _allgs(lay)
        if which == "all":
            targets = gs
        else:
            try:
                goid = int(which, 0)
            except ValueError:
                raise gdb.GdbError("goro: '%s' is not a goroutine id" % which)
            targets = [g for g in gs if g.goid == goid]
            if not targets:
                raise gdb.GdbError("goro: no goroutine %d" % goid)
        words = cmd.split()
        for g in targets:
            if which == "all":
                gdb.write("\ngoroutine %d [%s]:\n" % (g.goid, g.reason or g.status_name))
            if words[0] in ("bt", "backtrace", "where"):
                limit = 200
                if len(words) > 1 and words[1].isdigit():
                    limit = int(words[1])
                self.backtrace(lay, g, limit)
            else:
                with _InGoroutine(lay, g) as first:
                    first.select()
                    gdb.execute(cmd, from_tty)

    def backtrace(self, lay, g, limit):
        if not (g.on_thread() or g.parked()):
            gdb.write("goroutine %d has not run yet\n" % g.goid)
            return
        with _InGoroutine(lay, g) as first:
            frames = _frames(first, limit)
            for i, f in enumerate(frames):
                gdb.write("#%-3d %#018x in %s\n" % (i, f.pc(), _where(f)))
        if g.gopc:
            gdb.write("created by %s" % _symbol(g.gopc - 1))
            if g.parent_goid:
                gdb.write(" in goroutine %d" % g.parent_goid)
            gdb.write("\n")


_unwinder()
InfoGoroutines()
GoroutineCmd()
