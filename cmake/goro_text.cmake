# goro_text.cmake: renames every code section of libgoro.a (.text and the
# .text.* sections: cold and startup code, inline functions and templates
# emitted by goro's translation units) to `goro_text`, so that a program
# linking the static library gets goro's code in one output section the
# linker brackets with __start_goro_text/__stop_goro_text. Asynchronous
# preemption (src/runtime/asyncpreempt.cpp) never interrupts code in there.
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
