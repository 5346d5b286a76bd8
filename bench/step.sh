# Sourced by the GPU scripts (perf-gpu.sh, start-gpu.sh): the torch environment, and `step NAME
# SECONDS CMD…`, which runs CMD bounded, its output into $log, and says so where it failed, so that
# the next step still runs. Needs $log set.
export PATH=/opt/torch/.venv/bin:$PATH PYTHONUNBUFFERED=1
step() {
  local name=$1 limit=$2
  shift 2
  echo "== $name (at most ${limit} s) $(date -u +%T)" | tee -a "$log"
  timeout "$limit" "$@" >> "$log" 2>&1 || echo "$name: exit status $?" | tee -a "$log"
}
command -v bun > /dev/null || { echo "no bun on PATH (see bench/gpu-next.sh's header)"; exit 2; }
