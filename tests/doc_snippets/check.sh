#!/usr/bin/env bash
# Compiles and runs the code examples of the documentation, so that they
# cannot drift from the library: every ```cpp block in README.md and
# docs/*.md, and every example marked in a public header (include/goro).
#
#   tests/doc_snippets/check.sh CXX LIBGORO OUTDIR
#
#   CXX      the compiler (g++, clang++-14, ...); a missing clang++-14 is
#            installed with scripts/deps.sh when possible, else the check
#            is skipped (exit 77, which ctest reports as "Skipped")
#   LIBGORO  the built library to link (libgoro.a)
#   OUTDIR   scratch directory for the generated sources and binaries
#
# What a block is, and how it is compiled, comes from a marker on the line
# just before it (in Markdown an HTML comment, invisible when rendered):
#
#   <!-- snippet: KIND [exit=N] [norun] -->
#   ```cpp
#
# and, in a header comment, a line ending in "(snippet: KIND ...):" followed
# by the example, indented by at least three spaces after the "//":
#
#   // Example (snippet: main):
#   //   goro::options opt;
#
# KIND is one of
#   program    a complete program: compiled on its own, exactly as written,
#              and run. The default for a block that contains "int main(".
#   goroutine  statements, run inside goro::run([]() -> int { ... return 0;
#              }). The default for any other Markdown block.
#   main       statements, run in main() on the process's main thread (for
#              examples that start the runtime or use plain threads).
#   decls      namespace-scope declarations (functions, types): compiled only.
#   skip       not compiled; say why after the word, e.g.
#              <!-- snippet: skip (pseudo-code, not C++) -->.
# exit=N: the status the example exits with (default 0); norun: compile only.
#
# Fragments (goroutine, main, decls) are compiled together in one
# translation unit, each in its own namespace with tests/doc_snippets/
# prelude.hpp (includes and placeholder names such as work()) in force.
# #line directives make compiler errors point at the Markdown or header line.
# Every binary runs under `timeout`.
set -euo pipefail

if [[ $# -ne 3 ]]; then
  sed -n '2,12p' "$0" >&2
  exit 64
fi
cxx=$1
lib=$2
out=$3
root=$(cd "$(dirname "$0")/../.." && pwd)
run_limit=${SNIPPET_TIMEOUT:-30}

if ! command -v "$cxx" >/dev/null 2>&1; then
  if [[ $cxx == clang++-14 ]]; then
    bash "$root/scripts/deps.sh" clang >&2 || true
  fi
  if ! command -v "$cxx" >/dev/null 2>&1; then
    echo "doc snippets: SKIPPED: $cxx not found and could not be installed" \
      "(scripts/deps.sh clang installs clang++-14 on Debian 12)"
    exit 77
  fi
fi
[[ -f $lib ]] || {
  echo "doc snippets: $lib not found: build the library first" >&2
  exit 1
}

rm -rf "$out"
mkdir -p "$out/src" "$out/bin"
manifest=$out/manifest.txt
: >"$manifest"

cd "$root"
shopt -s nullglob
sources=(README.md docs/*.md include/goro/*.hpp include/goro/*/*.hpp)

# Extraction: one awk pass over all sources. Writes out/src/program_N.cpp per
# complete program, out/src/fragments.cpp for the rest, and the manifest:
#   N <TAB> kind <TAB> exit <TAB> run(0/1) <TAB> file:line
awk -v out="$out/src" -v manifest="$manifest" '
function fail(msg) {
  printf "doc snippets: %s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"
  failed = 1
  exit 1
}
function strip_indent(s, k,   i) {
  for (i = 1; i <= k && substr(s, 1, 1) ~ /[ \t]/; i++) s = substr(s, 2)
  return s
}
function begin_block(spec) {
  in_block = 1
  block_n = 0
  block_file = FILENAME
  block_line = FNR + 1
  block_spec = spec
}
function add_line(s) { block[++block_n] = s }
function end_block(   i, w, nw, kind, code, exitc, run, text, has_main) {
  in_block = 0
  text = ""
  has_main = 0
  for (i = 1; i <= block_n; i++) {
    text = text block[i] "\n"
    if (block[i] ~ /int[ \t]+main[ \t]*\(/) has_main = 1
  }
  nw = split(block_spec, w, /[ \t]+/)
  kind = nw >= 1 && w[1] != "" ? w[1] : (has_main ? "program" : "goroutine")
  if (kind == "skip") {
    if (nw < 2) fail("skip needs a reason: <!-- snippet: skip (why) -->")
    nskip++
    return
  }
  exitc = 0
  run = 1
  for (i = 2; i <= nw; i++) {
    if (w[i] ~ /^exit=[0-9]+$/) exitc = substr(w[i], 6) + 0
    else if (w[i] == "norun") run = 0
    else fail("unknown snippet option \"" w[i] "\" (exit=N, norun)")
  }
  id++
  if (kind == "program") {
    if (!has_main) fail("a program needs int main()")
    f = out "/program_" id ".cpp"
    printf "#line %d \"%s\"\n%s", block_line, block_file, text > f
    close(f)
  } else if (kind == "goroutine" || kind == "main") {
    if (has_main) fail("a " kind " fragment must not define main()")
    frag = frag sprintf("namespace snippet_%d {\nusing namespace goro_snippets;\nint body() {\n", id)
    if (kind == "goroutine") frag = frag "  return goro::run([]() -> int {\n"
    frag = frag sprintf("#line %d \"%s\"\n%s", block_line, block_file, text)
    frag = frag "return 0;\n"
    if (kind == "goroutine") frag = frag "  });\n"
    frag = frag sprintf("}\n}  // namespace snippet_%d\n\n", id)
    table = table sprintf("    {\"%d\", snippet_%d::body},\n", id, id)
  } else if (kind == "decls") {
    run = 0
    frag = frag sprintf("namespace snippet_%d {\nusing namespace goro_snippets;\n", id)
    frag = frag sprintf("#line %d \"%s\"\n%s", block_line, block_file, text)
    frag = frag sprintf("}  // namespace snippet_%d\n\n", id)
  } else {
    fail("unknown snippet kind \"" kind "\" (program, goroutine, main, decls, skip)")
  }
  printf "%d\t%s\t%d\t%d\t%s:%d\n", id, kind, exitc, run, block_file, block_line > manifest
}
FNR == 1 {
  if (in_block && !is_md) end_block()  # a header example that ends its file
  if (in_block) fail("unterminated code block")
  pending = ""
  have_pending = 0
  is_md = FILENAME ~ /\.md$/
}
# ---- Markdown: ```cpp fences, <!-- snippet: ... --> markers
is_md && in_block {
  if ($0 ~ /^[ \t]*```[ \t]*$/) end_block()
  else add_line(strip_indent($0, fence_indent))
  next
}
is_md && /^[ \t]*<!--[ \t]*snippet:.*-->[ \t]*$/ {
  spec = $0
  sub(/^[ \t]*<!--[ \t]*snippet:[ \t]*/, "", spec)
  sub(/[ \t]*-->[ \t]*$/, "", spec)
  pending = spec
  have_pending = 1
  next
}
is_md && /^[ \t]*```[ \t]*(cpp|c\+\+)[ \t]*$/ {
  fence_indent = match($0, /[^ \t]/) - 1
  begin_block(have_pending ? pending : "")
  have_pending = 0
  next
}
is_md {
  if (have_pending) fail("a snippet marker must come right before a ```cpp block")
  next
}
# ---- Headers: "... (snippet: KIND):" then "//   code" lines
in_block {
  if ($0 ~ /^[ \t]*\/\/   /) {
    s = $0
    sub(/^[ \t]*\/\//, "", s)
    add_line(strip_indent(s, comment_indent))
    next
  }
  end_block()
}
/^[ \t]*\/\/.*\(snippet:[^)]*\):?[ \t]*$/ {
  spec = $0
  sub(/^.*\(snippet:[ \t]*/, "", spec)
  sub(/\):?[ \t]*$/, "", spec)
  begin_block(spec)
  getline
  if ($0 !~ /^[ \t]*\/\/   /) fail("a snippet marker must be followed by an example indented by 3+ spaces")
  s = $0
  sub(/^[ \t]*\/\//, "", s)
  comment_indent = match(s, /[^ \t]/) - 1
  add_line(strip_indent(s, comment_indent))
  next
}
END {
  if (failed) exit 1
  if (in_block) { FNR++; fail("unterminated code block") }
  f = out "/fragments.cpp"
  printf "// Generated by tests/doc_snippets/check.sh from the documentation.\n" > f
  printf "#include \"prelude.hpp\"\n\n#include <cstring>\n\n%s", frag > f
  printf "int main(int argc, char** argv) {\n" > f
  printf "  struct entry {\n    const char* id;\n    int (*fn)();\n  };\n" > f
  printf "  static const entry table[] = {\n%s    {nullptr, nullptr}};\n", table > f
  printf "  for (const entry* e = table; argc == 2 && e->id; e++)\n" > f
  printf "    if (std::strcmp(e->id, argv[1]) == 0) return e->fn();\n" > f
  printf "  std::fprintf(stderr, \"usage: %%s SNIPPET_ID\\n\", argv[0]);\n" > f
  printf "  return 64;\n}\n" > f
  close(f)
  printf "doc snippets: %d examples extracted, %d skipped\n", id, nskip
}
' "${sources[@]}"

flags=(-std=c++20 -Wall -Wextra -Werror -O1 -pthread -I"$root/include")
log=$out/log.txt
: >"$log"
failures=()

compile() {  # compile NAME SOURCE [EXTRA...]: true if it built
  local name=$1 src=$2
  shift 2
  if ! "$cxx" "${flags[@]}" "$@" "$src" "$lib" -o "$out/bin/$name" \
    >"$out/$name.compile.txt" 2>&1; then
    echo "doc snippets: FAILED to compile $name with $cxx:"
    sed 's/^/  /' "$out/$name.compile.txt" | head -n 60
    return 1
  fi
}

start=$SECONDS
compile fragments "$out/src/fragments.cpp" -I"$root/tests/doc_snippets" ||
  failures+=("fragments (compile)")
while IFS=$'\t' read -r id kind exitc run where; do
  if [[ $kind == program ]]; then
    compile "program_$id" "$out/src/program_$id.cpp" ||
      failures+=("$where (compile)")
  fi
done <"$manifest"
echo "doc snippets: compiled with $cxx in $((SECONDS - start)) s"

start=$SECONDS
nrun=0
while IFS=$'\t' read -r id kind exitc run where; do
  [[ $run == 1 ]] || continue
  if [[ $kind == program ]]; then
    bin=("$out/bin/program_$id")
  else
    bin=("$out/bin/fragments" "$id")
  fi
  [[ -x ${bin[0]} ]] || continue  # did not compile: reported above
  rc=0
  # Run in the build directory: examples may write files (trace.json).
  (cd "$out" && timeout "$run_limit" "${bin[@]}" >"$out/run_$id.txt" 2>&1 \
    </dev/null) || rc=$?
  nrun=$((nrun + 1))
  echo "== $where ($kind): exit $rc" >>"$log"
  cat "$out/run_$id.txt" >>"$log"
  if [[ $rc -ne $exitc ]]; then
    if [[ $rc -eq 124 ]]; then
      why="timed out after $run_limit s"
    else
      why="exited with $rc, want $exitc"
    fi
    echo "doc snippets: FAILED: $where ($kind) $why; its output:"
    sed 's/^/  /' "$out/run_$id.txt" | head -n 40
    failures+=("$where ($why)")
  fi
done <"$manifest"
echo "doc snippets: ran $nrun examples in $((SECONDS - start)) s"

if [[ ${#failures[@]} -gt 0 ]]; then
  echo "doc snippets: ${#failures[@]} failure(s) with $cxx:"
  printf '  %s\n' "${failures[@]}"
  exit 1
fi
echo "doc snippets: all examples pass with $cxx"
