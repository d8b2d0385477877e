#!/usr/bin/env bash
# make stress: the end-to-end tests that showed timing-dependent failures,
# and those whose result depends on how threads interleave (calls in time
# order across threads, a child's threads at its exit), run RUNS times
# (default 200) on each engine while the machine is busy: two CPU hogs and
# a `go test -race` of the slow packages loop beside them.
# A failure keeps its output in $STRESS_DIR (default /tmp/rtrace-stress),
# and the traces of the tests that keep them (testutil.KeepOnFailure).
# Tests synchronise on what the programs do, never on time: a failure here
# is a bug, not flakiness. Then the fault tests (docs/RELIABILITY.md) once.
# ENGINES (default "fast int3") picks the engines.
set -uo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-200}
TESTS=${TESTS:-'TestToggle$|TestWindowEnd|TestRecordMemoryUftrace|TestAttach$/memory|TestRecordLeaks|TestRecordFileLeaks|TestRecordForkLeaks|TestResourceThreadsOrder|TestResourceForkThreads|TestResourceRingWait|TestResourceOrderOneThread'}
OUT=${STRESS_DIR:-/tmp/rtrace-stress}
mkdir -p "$OUT"
# A copy of the tree: each run's TestMain builds rtrace from the source,
# which must not change under it while the runs go on.
rm -rf "$OUT/src"
mkdir -p "$OUT/src"
tar --exclude=./.git --exclude=./testdata/build --exclude=./bin --exclude=./demo -cf - . | tar -xf - -C "$OUT/src"
cd "$OUT/src" || exit 1
go test -c -o "$OUT/e2e.test" ./e2e || exit 1

pids=()
for _ in 1 2; do (while :; do :; done) & pids+=($!); done
(while :; do go test -race -count=1 ./resolver ./tracer/bp >/dev/null 2>&1; done) & pids+=($!)
stop() { kill "${pids[@]}" 2>/dev/null; pkill -P $$ 2>/dev/null; }
trap stop EXIT

fails=0
for engine in ${ENGINES:-fast int3}; do
  for ((i = 1; i <= RUNS; i++)); do
    log="$OUT/$engine-$i.log"
    if (cd e2e && RTRACE_KEEP_FAILED="$OUT/$engine-$i.kept" RTRACE_ENGINE=$engine "$OUT/e2e.test" -test.count=1 -test.timeout=10m -test.run "$TESTS" >"$log" 2>&1); then
      rm -f "$log"
    else
      fails=$((fails + 1))
      echo "stress: $engine run $i failed: $log"
      grep -E -- '--- FAIL|exit [0-9]+|panic' "$log" | head -5
      if grep -q 'already an int3' "$log"; then
        echo "stress: another tool's uprobe (bpftrace, perf probe) was on a traced function: docs/FAST-PATH.md, Known gaps"
      fi
    fi
    if ((i % 20 == 0)); then echo "stress: $engine: $i of $RUNS runs, $fails failed so far"; fi
  done
done
# The faults of docs/RELIABILITY.md once, rtrace attach SIGKILLed 50
# times a mode (RTRACE_KILL_ROUNDS) at moments the program's progress
# moves.
log="$OUT/faults.log"
if (cd e2e && RTRACE_KILL_ROUNDS=${KILL_ROUNDS:-50} "$OUT/e2e.test" -test.count=1 -test.timeout=20m -test.run 'TestAttachKilled|TestAttachInterruptedTwice|TestToggleStaleState|TestDetachWhileBlockedInside|TestAttachDuringVfork' >"$log" 2>&1); then
  rm -f "$log"
else
  fails=$((fails + 1))
  echo "stress: the fault tests failed: $log"
  grep -E -- '--- FAIL|panic' "$log" | head -5
fi
echo "stress: $fails of $(($(wc -w <<<"${ENGINES:-fast int3}") * RUNS + 1)) runs failed"
[ "$fails" = 0 ]
