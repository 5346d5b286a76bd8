#!/usr/bin/env bash
# Runs CMD in this process (exec: its pid is this script's, as bench/monitor-cost.ts measures it), its
# standard error into LOG, and once a second the seconds since the start and LOG's size so far into
# LOG.marks: JSC's compile report (BUN_JSC_reportCompileTimes) carries no time of its own, and a reader
# that stamps each line as it comes falls behind a burst of compiles (and stalls the writer's pipe).
# bench/support/compile-report.py reads the two.
#   bash bench/support/stamp-stderr.sh LOG CMD...
log=${1:?LOG}
shift
: > "$log"
: > "$log.marks"
me=$$
t0=$(date +%s.%N)
( while kill -0 "$me" 2>/dev/null; do
    echo "$(date +%s.%N) $(stat -c %s "$log" 2>/dev/null || echo 0)" >> "$log.marks"
    sleep 1
  done ) &
exec "$@" 2>> "$log"
