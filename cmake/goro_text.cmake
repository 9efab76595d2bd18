# goro_text.cmake: renames every code section of libgoro.a (.text and the
# .text.* sections: cold and startup code, inline functions and templates
# emitted by goro's translation units) to `goro_text`, so that a program
# linking the static library gets goro's code in one output section the
# linker brackets with __start_goro_text/__stop_goro_text. Asynchronous
# preemption (src/runtime/asyncsafepoint.cpp) never interrupts code in there.
#
#   cmake -DREADELF=... -DOBJCOPY=... -DARCHIVE=libgoro.a -P goro_text.cmake
execute_process(
  COMMAND "${READELF}" -SW "${ARCHIVE}"
  OUTPUT_VARIABLE _out
  RESULT_VARIABLE _rc)
if(NOT _rc EQUAL 0)
  message(FATAL_ERROR "goro_text: ${READELF} -SW ${ARCHIVE} failed")
endif()
# (Not "] .text": a "]" would split the CMake list.)
string(REGEX MATCHALL " \\.text[A-Za-z0-9_.]*" _secs "${_out}")
set(_names "")
foreach(_s IN LISTS _secs)
  string(SUBSTRING "${_s}" 1 -1 _n)
  list(APPEND _names "${_n}")
endforeach()
list(REMOVE_DUPLICATES _names)
set(_args "")
foreach(_n IN LISTS _names)
  list(APPEND _args --rename-section "${_n}=goro_text")
endforeach()
if(_args)
  execute_process(
    COMMAND "${OBJCOPY}" ${_args} "${ARCHIVE}"
    RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "goro_text: ${OBJCOPY} failed on ${ARCHIVE}")
  endif()
endif()

# goro's own copies of inline functions and template instances. The
# compiler emits an out-of-line inline function (std::__is_constant_evaluated
# at -O0, goro::mutex::unlock, casgstatus...) as a weak COMDAT in every
# object that uses it, and the linker keeps ONE copy for the whole program:
# the user's, in the program's .text, when the program's objects come
# first. goro's calls would then run code that asynchronous preemption
# treats as the user's and may interrupt in the middle of the scheduler
# (a debug build of the tests hit "startm: p has runnable gs"). Renaming
# goro's weak function symbols (and with them their COMDAT group
# signatures) to goro-private names keeps goro's copies apart: goro calls
# its own, which sit in goro_text. Weak data (vtables, typeinfo, static
# locals of inline functions) keeps its name, so there is still one of each.
if(NM)
  execute_process(
    COMMAND "${NM}" --defined-only "${ARCHIVE}"
    OUTPUT_VARIABLE _syms
    RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "goro_text: ${NM} ${ARCHIVE} failed")
  endif()
  string(REGEX MATCHALL "[0-9a-f]+ W [^\n]+" _weak "${_syms}")
  set(_list "")
  foreach(_l IN LISTS _weak)
    string(REGEX REPLACE "^[0-9a-f]+ W " "" _sym "${_l}")
    list(APPEND _list "${_sym}")
  endforeach()
  # Constructors and destructors: the complete and base variants (C1/C2,
  # D1/D2) share one COMDAT group whose signature is the C5/D5 name, which
  # is no function symbol: rename it too, or goro's group is still merged
  # with the user's and goro's renamed C1/C2 are dropped with it.
  execute_process(
    COMMAND "${READELF}" -gW "${ARCHIVE}"
    OUTPUT_VARIABLE _groups
    RESULT_VARIABLE _rc)
  if(NOT _rc EQUAL 0)
    message(FATAL_ERROR "goro_text: ${READELF} -gW ${ARCHIVE} failed")
  endif()
  string(REGEX MATCHALL "\\[[^ \n]*[CD]5[EIB][^ \n]*\\] contains" _ctor_groups
         "${_groups}")
  foreach(_g IN LISTS _ctor_groups)
    string(REGEX REPLACE " contains$" "" _g "${_g}")
    string(LENGTH "${_g}" _len)
    math(EXPR _len "${_len} - 2")
    string(SUBSTRING "${_g}" 1 ${_len} _sig)
    list(APPEND _list "${_sig}")
  endforeach()
  list(REMOVE_DUPLICATES _list)
  set(_map "")
  foreach(_sym IN LISTS _list)
    string(APPEND _map "${_sym} goro.private.${_sym}\n")
  endforeach()
  if(_map)
    set(_mapfile "${ARCHIVE}.weak-syms")
    file(WRITE "${_mapfile}" "${_map}")
    execute_process(
      COMMAND "${OBJCOPY}" "--redefine-syms=${_mapfile}" "${ARCHIVE}"
      RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR "goro_text: ${OBJCOPY} --redefine-syms failed")
    endif()
  endif()
endif()
