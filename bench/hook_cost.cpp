// hook_cost.cpp — the allocator hook's own cost per event, apart from PyTorch's and the machine's.
//
// Built and run by bench/hook_cost.py with the agent's own compiler command (build.py's
// build_command: same flags, same torch headers and libraries), as an executable instead of a
// shared library. It includes cuda/hook.cpp itself, so the code measured is the code the agent
// loads, with no entry point added for the benchmark.
//
// For each TraceEntry action: the tracker is called through a std::function, as the allocator
// calls its trackers, on synthetic entries in a tight loop; rdtsc cycles and ns per event, the
// minimum over many runs. The same loop with an empty tracker is the loop's own floor; the hook's
// cost is the difference. The ring is a real one (a file in /dev/shm, header laid out as the agent
// lays it out for one device: the shared lane and device 0's lane, the agent's default capacity),
// so the stores go where they go in a training process. Every row writes device 0's own lane (the
// single-writer claim); the last row writes the shared lane instead (its atomic claim), as a device
// without a lane of its own does.
//
//   hook_cost RUNS EVENTS_PER_RUN   → one JSON object on standard output
#include "hook.cpp"

#include <cinttypes>
#include <cstdlib>
#include <functional>
#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace {

using Tracker = std::function<void(const cca::TraceEntry&)>;

constexpr uint64_t kCapacity = 1u << 18;  // the agent's DEFAULT_CAPACITY (ring.py)
constexpr uint32_t kLanes = 2;            // one device: the shared lane and device 0's (ring.py)
constexpr size_t kEntries = 64;  // distinct entries cycled through (a power of two); they stay in L1,
                                 // as the one entry the allocator builds on its stack does

uint64_t cycles() {
#if defined(__x86_64__)
  return __rdtsc();
#else
  return 0;  // no TSC: cycles are reported as null
#endif
}

int64_t mono_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// TSC ticks per ns, over 200 ms.
double tsc_per_ns() {
  const uint64_t c0 = cycles();
  const int64_t n0 = mono_ns();
  timespec pause{0, 200000000L};
  nanosleep(&pause, nullptr);
  const uint64_t c1 = cycles();
  const int64_t n1 = mono_ns();
  return double(c1 - c0) / double(n1 - n0);
}

// A ring file as the agent creates it (gpumem_agent/ring.py Ring.__init__), mapped and published
// to the hook the way gpumem_hook_attach publishes it, without the allocator registration (which
// needs a CUDA device: only the tracker's body is measured here).
gpumem_header* make_ring(std::string& path) {
  char name[] = "/dev/shm/gpumem-hook-cost-XXXXXX";
  int fd = mkstemp(name);
  if (fd < 0) {
    std::fprintf(stderr, "hook_cost: cannot create a ring file in /dev/shm: %s\n", std::strerror(errno));
    std::exit(1);
  }
  path = name;
  const size_t size = GPUMEM_HEADER_SIZE + kLanes * kCapacity * GPUMEM_RECORD_SIZE;
  if (ftruncate(fd, off_t(size)) != 0) {
    std::fprintf(stderr, "hook_cost: cannot size the ring file: %s\n", std::strerror(errno));
    std::exit(1);
  }
  void* map = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) {
    std::fprintf(stderr, "hook_cost: cannot map the ring file: %s\n", std::strerror(errno));
    std::exit(1);
  }
  std::memset(map, 0, size);  // every page touched once, as a ring that has lapped once
  auto* h = static_cast<gpumem_header*>(map);
  h->magic = GPUMEM_RING_MAGIC;
  h->abi_version = GPUMEM_RING_ABI_VERSION;
  h->header_size = GPUMEM_HEADER_SIZE;
  h->record_size = GPUMEM_RECORD_SIZE;
  h->n_devices = 1;
  h->capacity = kCapacity;
  h->n_lanes = kLanes;
  h->pid = int32_t(getpid());
  h->mode = GPUMEM_MODE_HOOK;
  h->cur_phase = GPUMEM_PHASE_FORWARD;
  h->cur_step = 7;
  h->cur_range = 3;
  g_device_lanes.store(kLanes - 1, std::memory_order_relaxed);  // as gpumem_hook_attach reads it
  g_header.store(h, std::memory_order_release);
  return h;
}

// kEntries entries; entry i has action `action_of(i)` and its own address and size.
template <typename ActionOf>
std::vector<cca::TraceEntry> entries_of(ActionOf action_of) {
  std::vector<cca::TraceEntry> out;
  out.reserve(kEntries);
  auto* stream = reinterpret_cast<void*>(uintptr_t(0x5a5a000));
  for (size_t i = 0; i < kEntries; i++) {
    const size_t addr = 0x7f0000000000ull + i * 0x200000ull;
    const size_t size = 512 * (1 + (i * 37) % 4096);
    out.emplace_back(action_of(i), c10::DeviceIndex(0), addr, size, stream, c10::MempoolId_t{0, 0}, c10::getApproximateTime());
  }
  return out;
}

struct Timing {
  double cycles_per_event;  // minimum over runs
  double ns_per_event;      // minimum over runs
};

// Not inlined: the tracker stays an opaque call through std::function, as in the allocator.
__attribute__((noinline)) Timing time_loop(const Tracker& tracker, const std::vector<cca::TraceEntry>& entries, int runs, uint64_t events) {
  Timing best{1e300, 1e300};
  const size_t mask = entries.size() - 1;
  for (int run = 0; run < runs; run++) {
    const int64_t n0 = mono_ns();
    const uint64_t c0 = cycles();
    for (uint64_t i = 0; i < events; i++) tracker(entries[i & mask]);
    const uint64_t c1 = cycles();
    const int64_t n1 = mono_ns();
    best.cycles_per_event = std::min(best.cycles_per_event, double(c1 - c0) / double(events));
    best.ns_per_event = std::min(best.ns_per_event, double(n1 - n0) / double(events));
  }
  return best;
}

const char* kActionNames[] = {"alloc", "free_requested", "free_completed", "segment_alloc", "segment_free",
                              "segment_map", "segment_unmap", "snapshot", "oom"};

// Cycles as a JSON number, or null where the processor has no TSC to read.
std::string cycles_json(double v, bool has_tsc) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return has_tsc ? std::string(buf) : std::string("null");
}

void print_row(const char* name, const char* lane, const Timing& hook, const Timing& floor, bool has_tsc, bool last) {
  std::printf(
      "    {\"action\": \"%s\", \"lane\": \"%s\", \"hook_cycles\": %s, \"hook_ns\": %.3f, \"floor_cycles\": %s, \"floor_ns\": %.3f, "
      "\"added_cycles\": %s, \"added_ns\": %.3f}%s\n",
      name, lane, cycles_json(hook.cycles_per_event, has_tsc).c_str(), hook.ns_per_event, cycles_json(floor.cycles_per_event, has_tsc).c_str(),
      floor.ns_per_event, cycles_json(hook.cycles_per_event - floor.cycles_per_event, has_tsc).c_str(),
      hook.ns_per_event - floor.ns_per_event, last ? "" : ",");
}

// One row: the hook and the empty tracker, interleaved run by run so that a slow moment of the
// machine hits both alike, after a warm-up (the ring's pages, the branch predictors).
void measure(const char* name, const std::vector<cca::TraceEntry>& entries, const Tracker& hook, const Tracker& empty,
             int runs, uint64_t events, bool has_tsc, bool last) {
  time_loop(hook, entries, 3, events);
  time_loop(empty, entries, 3, events);
  Timing hook_best{1e300, 1e300}, floor_best{1e300, 1e300};
  for (int run = 0; run < runs; run++) {
    const Timing th = time_loop(hook, entries, 1, events);
    const Timing tf = time_loop(empty, entries, 1, events);
    hook_best = {std::min(hook_best.cycles_per_event, th.cycles_per_event), std::min(hook_best.ns_per_event, th.ns_per_event)};
    floor_best = {std::min(floor_best.cycles_per_event, tf.cycles_per_event), std::min(floor_best.ns_per_event, tf.ns_per_event)};
  }
  print_row(name, g_device_lanes.load() > 0 ? "device" : "shared", hook_best, floor_best, has_tsc, last);
}

}  // namespace

int main(int argc, char** argv) {
  const int runs = argc > 1 ? std::atoi(argv[1]) : 200;
  const long long per_run = argc > 2 ? std::atoll(argv[2]) : 100000;
  if (runs < 1 || per_run < 1) {
    std::fprintf(stderr, "hook_cost: usage: hook_cost RUNS EVENTS_PER_RUN (both positive whole numbers)\n");
    return 2;
  }
  const uint64_t events = uint64_t(per_run);
  const bool has_tsc = cycles() != 0;
  const double ticks_per_ns = has_tsc ? tsc_per_ns() : 0.0;
  std::string path;
  gpumem_header* h = make_ring(path);

  Tracker hook = on_trace;                            // what attachAllocatorTraceTracker stores
  Tracker empty = [](const cca::TraceEntry&) {};      // the loop's own floor: the call and nothing
  std::printf("{\n  \"runs\": %d,\n  \"events_per_run\": %" PRIu64 ",\n  \"tsc_ticks_per_ns\": %.4f,\n", runs, events, ticks_per_ns);
  std::printf("  \"ring_capacity\": %" PRIu64 ",\n  \"actions\": [\n", kCapacity);
  const int n_actions = int(sizeof kActionNames / sizeof kActionNames[0]);
  for (int a = 0; a < n_actions; a++) {
    const auto action = static_cast<cca::TraceEntry::Action>(a);
    measure(kActionNames[a], entries_of([action](size_t) { return action; }), hook, empty, runs, events, has_tsc, false);
  }
  // A training process's mix: every block is allocated, freed, and its free completed.
  const cca::TraceEntry::Action cycle[] = {cca::TraceEntry::ALLOC, cca::TraceEntry::FREE_REQUESTED, cca::TraceEntry::FREE_COMPLETED};
  const auto mixed = entries_of([&cycle](size_t i) { return cycle[i % 3]; });
  measure("mixed", mixed, hook, empty, runs, events, has_tsc, false);
  // Python stacks on (the default), every allocation below the threshold: what each one pays is the
  // threshold's compare and the device's countdown of bytes (cuda/pystack.h gpumem_pystack_wanted),
  // a subtraction and a branch. The countdown never runs out here: the walk a sample costs is timed
  // by bench/pystack_cost.py (this build has no interpreter to walk).
  g_stack_min.store(uint64_t(1) << 40, std::memory_order_relaxed);
  for (auto& s : gpumem_pystack_samplers) s.left = INT64_MAX;
  measure("alloc, stacks on (below the threshold)", entries_of([](size_t) { return cca::TraceEntry::ALLOC; }), hook, empty, runs, events, has_tsc, false);
  measure("mixed, stacks on (below the threshold)", mixed, hook, empty, runs, events, has_tsc, false);
  g_stack_min.store(0, std::memory_order_relaxed);
  // The same mix on the shared lane: a device without a lane of its own (fetch-add claim).
  g_device_lanes.store(0);
  measure("mixed", mixed, hook, empty, runs, events, has_tsc, true);
  const uint64_t written = __atomic_load_n(&h->write_index, __ATOMIC_RELAXED) + __atomic_load_n(&h->lanes[0].write_index, __ATOMIC_RELAXED);
  std::printf("  ],\n  \"records_written\": %" PRIu64 ",\n  \"n_alloc\": %" PRId64 "\n}\n", written, h->totals[0].n_alloc);
  g_header.store(nullptr);
  unlink(path.c_str());
  return written > 0 ? 0 : 1;  // the hook wrote nothing: the measurement measured nothing
}
