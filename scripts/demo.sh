#!/usr/bin/env bash
# make demo: build a sample C program, record it with rtrace, show the trace
# with the real uftrace.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p demo
gcc -O0 -g -o demo/sample testdata/sample.c
gcc -O2 -g -o demo/leaky testdata/leaky.c
echo "== rtrace sp-rtrace -e memory -s -o demo/raw -x demo/leaky   (resource tracing, sp-rtrace's options)"
rm -rf demo/raw
bin/rtrace sp-rtrace -e memory -s -o demo/raw -x demo/leaky
echo "== rtrace postproc -l -c -i demo/raw/*.rtrace | rtrace resolve   (the leaks, grouped by backtrace)"
bin/rtrace postproc -l -c -i demo/raw/*.rtrace | bin/rtrace resolve
echo "== rtrace record -d demo/uftrace.data -- demo/sample   (function tracing)"
rm -rf demo/uftrace.data
bin/rtrace record -d demo/uftrace.data -- demo/sample
if ! command -v uftrace >/dev/null; then
  echo "uftrace is not installed (apt-get install uftrace) to show the trace"
  exit 0
fi
echo "== uftrace replay -d demo/uftrace.data"
uftrace replay --no-pager -d demo/uftrace.data
echo "== uftrace report -d demo/uftrace.data"
uftrace report --no-pager -d demo/uftrace.data
