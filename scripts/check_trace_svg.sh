#!/bin/sh
# check_trace_svg.sh TRACE_TEST_BINARY WORKDIR
#
# Renders a goro execution trace with goro_tracesvg (through trace_test's
# TraceSvg.RendersOneLanePerP, which keeps trace.json and trace.svg in
# WORKDIR/trace_svg) and opens the SVG in headless Chromium, which must
# render it into a non-trivial screenshot (WORKDIR/trace_svg/trace.png, to
# look at). Exit 0: rendered; 1: failed; 77: skipped (no chromium), with
# the reason on stdout.
set -u
test_bin=${1:?usage: check_trace_svg.sh TRACE_TEST_BINARY WORKDIR}
work=${2:?usage: check_trace_svg.sh TRACE_TEST_BINARY WORKDIR}/trace_svg

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null 2>&1; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  echo "SKIPPED: no chromium in PATH (Debian: apt-get install chromium);" \
       "the SVG itself is still checked by TraceSvg.RendersOneLanePerP"
  exit 77
fi

rm -rf "$work" && mkdir -p "$work" || exit 1
GORO_TRACE_KEEP_DIR=$work "$test_bin" \
  --gtest_filter=TraceSvg.RendersOneLanePerP || exit 1
[ -s "$work/trace.svg" ] || { echo "FAIL: no $work/trace.svg"; exit 1; }

# Chromium wants a writable home and profile; keep both in the work dir.
HOME=$work timeout 90 "$browser" --headless --disable-gpu --no-sandbox \
  --user-data-dir="$work/profile" --hide-scrollbars \
  --screenshot="$work/trace.png" --window-size=1400,800 \
  "file://$work/trace.svg" >"$work/chromium.log" 2>&1
rc=$?
if [ ! -s "$work/trace.png" ]; then
  echo "FAIL: chromium (exit $rc) wrote no screenshot; see $work/chromium.log"
  exit 1
fi
size=$(wc -c <"$work/trace.png")
# A blank 1400x800 page compresses to a few KB; lanes, slices and labels
# make it much larger.
if [ "$size" -lt 20000 ]; then
  echo "FAIL: $work/trace.png is only $size bytes: nothing drawn?"
  exit 1
fi
echo "ok: $work/trace.svg rendered by $browser into $work/trace.png ($size bytes)"
