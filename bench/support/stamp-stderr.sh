#!/usr/bin/env bash
# Runs CMD in this process (exec: its pid is this script's, as bench/monitor-cost.ts measures it), its
# standard error's lines stamped with the seconds since the start, into LOG (JSC's compile report,
# BUN_JSC_reportCompileTimes, carries no time of its own).
#   bash bench/support/stamp-stderr.sh LOG CMD...
log=${1:?LOG}
shift
exec "$@" 2> >(awk -v t0="$(date +%s.%N)" '{ "date +%s.%N" | getline t; close("date +%s.%N"); printf "%.1f %s\n", t - t0, $0 }' > "$log")
