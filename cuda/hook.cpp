// hook.cpp — the in-process writer of the event ring (layout: gpumem_ring.h).
//
// Built by the Python agent (agent/gpumem_agent/build.py) against the torch the process imported,
// loaded with ctypes, and driven through the extern "C" functions at the bottom. Per allocator
// event: no Python, no allocation, no syscall, no lock of its own — the allocator calls us under its
// per-device lock, with the GIL possibly held, so we only do arithmetic and stores.
#include <ATen/record_function.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/util/ApproximateClock.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <type_traits>
#include <utility>
#include <unordered_map>
#include <vector>

#include "gpumem_ring.h"
#include "pystack.h"

namespace cca = c10::cuda::CUDACachingAllocator;

namespace {

std::atomic<gpumem_header*> g_header{nullptr};
// Devices with a lane of their own (the ring's n_lanes - 1), read once at attach, stored before
// g_header: device d < this writes lane 1 + d with the single-writer claim, any other the shared lane.
std::atomic<uint32_t> g_device_lanes{0};
std::once_flag g_tracker_once;
std::atomic<bool> g_exact{false};  // read the allocator's own stats at each event (see on_trace)
std::atomic<bool> g_empty{false};  // benchmark only: a tracker that returns at once (torch's own cost)
std::atomic<uint64_t> g_stack_min{0};  // allocations this large carry their Python stack, smaller ones sampled (0: none)

template <typename T>
uint64_t as_u64(T v) {
  if constexpr (std::is_pointer_v<T>) return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(v));
  else return static_cast<uint64_t>(v);
}

int64_t unix_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Exact totals straight from the allocator's statistics. Safe here: its mutex is recursive and
// already held by this thread. Costs a copy of the stats; used only where the caller asked for it.
// Out of line: inlined, its stats buffer and registers made every event's call save and restore six
// registers and set up a stack frame.
__attribute__((noinline, cold)) void copy_exact(gpumem_totals* t, c10::DeviceIndex device) {
  using c10::CachingDeviceAllocator::StatType;
  auto s = cca::getDeviceStats(device);
  const auto all = static_cast<size_t>(StatType::AGGREGATE);
  __atomic_store_n(&t->allocated, int64_t(s.allocated_bytes[all].current), __ATOMIC_RELAXED);
  __atomic_store_n(&t->reserved, int64_t(s.reserved_bytes[all].current), __ATOMIC_RELAXED);
  __atomic_store_n(&t->active, int64_t(s.active_bytes[all].current), __ATOMIC_RELAXED);
  __atomic_store_n(&t->peak_allocated, int64_t(s.allocated_bytes[all].peak), __ATOMIC_RELAXED);
  __atomic_store_n(&t->peak_reserved, int64_t(s.reserved_bytes[all].peak), __ATOMIC_RELAXED);
  __atomic_store_n(&t->peak_active, int64_t(s.active_bytes[all].peak), __ATOMIC_RELAXED);
  __atomic_store_n(&t->n_retries, int64_t(s.num_alloc_retries), __ATOMIC_RELAXED);
}

// A segment's pool (torch's MempoolId_t, a pair: (0, 0) the default pool, a CUDA graph's or a
// torch.cuda.MemPool's otherwise) as the record's `extra`: first << 32 | second (gpumem_ring.h).
// A torch whose TraceEntry carries no pool (before mempool_ was added) writes 0 and says so through
// gpumem_hook_features, so a reader knows the pools are not told apart.
template <typename T, typename = void>
struct has_mempool : std::false_type {};
template <typename T>
struct has_mempool<T, std::void_t<decltype(std::declval<T>().mempool_)>> : std::true_type {};

inline bool segment_action(uint8_t action) {
  return action >= GPUMEM_ACTION_SEGMENT_ALLOC && action <= GPUMEM_ACTION_SEGMENT_UNMAP;
}

template <typename Entry>
inline uint64_t pool_of(const Entry& te) {
  if constexpr (has_mempool<Entry>::value) {
    return (uint64_t(te.mempool_.first) << 32) | uint64_t(uint32_t(te.mempool_.second));
  } else {
    return 0;
  }
}

// The stack of an allocation that carries one (cuda/pystack.h: the calling thread's frames), out of line.
__attribute__((noinline, cold)) uint64_t stack_of_alloc() { return gpumem_pystack_capture(); }

// What `extra` carries: for OOM the free bytes (PyTorch stores them in addr_), for a segment its
// pool, for an allocation that carries a stack (at or above the threshold, or sampled below it by
// the device's countdown of bytes: pystack.h) its stack's id.
inline uint64_t extra_of(const cca::TraceEntry& te, uint8_t action) {
  if (te.action_ == cca::TraceEntry::OOM) return te.addr_;
  if (action == GPUMEM_ACTION_ALLOC) {
    const uint64_t min = g_stack_min.load(std::memory_order_relaxed);
    return min != 0 && gpumem_pystack_wanted(static_cast<uint32_t>(te.device_), te.size_, min) ? stack_of_alloc() : 0;
  }
  return segment_action(action) ? pool_of(te) : 0;
}

// What `address` carries: the block's, or for OOM (PyTorch has none) the stack of the request that
// failed where stacks are on, whatever its size: the line that asked (rare, so never sampled).
inline uint64_t address_of(const cca::TraceEntry& te) {
  if (te.action_ != cca::TraceEntry::OOM) return te.addr_;
  return g_stack_min.load(std::memory_order_relaxed) != 0 ? stack_of_alloc() : 0;
}

// The event as a record, stamped with where the loop is (the header's current state). A device
// without a lane of its own writes the shared lane (several writers: the atomic claim), out of line,
// off the path of the devices that have one.
__attribute__((noinline)) void push_shared(gpumem_header* h, const cca::TraceEntry& te, uint8_t action) {
  gpumem_record r;
  r.time = static_cast<uint64_t>(te.time_.approx_t_);
  r.address = address_of(te);
  r.size = te.size_;
  r.stream = as_u64(te.stream_);
  r.extra = extra_of(te, action);
  r.step = __atomic_load_n(&h->cur_step, __ATOMIC_RELAXED);
  r.range = __atomic_load_n(&h->cur_range, __ATOMIC_RELAXED);
  r.action = action;
  r.device = static_cast<int8_t>(te.device_);
  r.phase = __atomic_load_n(&h->cur_phase, __ATOMIC_RELAXED);
  r.flags = 0;
  r.line = __atomic_load_n(&h->cur_line, __ATOMIC_RELAXED);
  gpumem_ring_push(h, &r);
}

// Allocated and active in bytes of whole blocks need the block's size, which the trace does not
// carry (it carries the requested size). Segment sizes, counts and requested bytes are exact from
// the events alone; the agent's thread copies the block-size figures from memory_stats() often.
void on_trace(const cca::TraceEntry& te) {
  gpumem_header* h = g_header.load(std::memory_order_acquire);
  if (!h || g_empty.load(std::memory_order_relaxed)) return;
  const auto action = static_cast<uint8_t>(te.action_);
  const auto dev = static_cast<uint32_t>(te.device_);
  if (dev < GPUMEM_MAX_DEVICES) {
    gpumem_totals* t = &h->totals[dev];
    gpumem_totals_apply(t, action, static_cast<int64_t>(te.size_));
    if (g_exact.load(std::memory_order_relaxed)) copy_exact(t, te.device_);
  }
  if (dev >= g_device_lanes.load(std::memory_order_relaxed)) return push_shared(h, te, action);
  // The allocator's lock makes this thread the only writer of the device's lane: no claim to race
  // for, and the record goes out in a few wide stores (gpumem_lane_write).
  gpumem_lane_write(h, dev, static_cast<uint64_t>(te.time_.approx_t_), address_of(te), te.size_, as_u64(te.stream_),
                    extra_of(te, action), __atomic_load_n(&h->cur_step, __ATOMIC_RELAXED), __atomic_load_n(&h->cur_range, __ATOMIC_RELAXED),
                    action, static_cast<int8_t>(te.device_), __atomic_load_n(&h->cur_phase, __ATOMIC_RELAXED),
                    __atomic_load_n(&h->cur_line, __ATOMIC_RELAXED));
}

// Sync records: the allocator's exact figures of each device, tied to a point of the stream, so a
// reader compares its block detail with torch's totals at the same moment (the header's live totals
// run ahead of the records a reader has taken). Written at attach, at every step mark and at
// detach: a few microseconds a step, nothing per allocator event.
// `point` (enum gpumem_point, or -1 for none): each device's sync is followed by a SYNC_PEAKS
// record from the same reading (peaks and active), for GPUMEM_TUI_MARKS=hooks.
void push_sync(gpumem_header* h, bool every_device, int point = -1) {
  if (g_empty.load(std::memory_order_relaxed)) return;
  using c10::CachingDeviceAllocator::StatType;
  const auto all = static_cast<size_t>(StatType::AGGREGATE);
  const uint32_t n = std::min<uint32_t>(h->n_devices, GPUMEM_MAX_DEVICES);
  for (uint32_t dev = 0; dev < n; dev++) {
    gpumem_totals* t = &h->totals[dev];
    auto events = [t] { return GPUMEM_LOAD(&t->n_alloc) + GPUMEM_LOAD(&t->n_free); };
    const int64_t before = events();
    // Takes the device's allocator lock: the figures are those after some event, and an
    // unchanged count on both sides says which one.
    auto s = cca::getDeviceStats(static_cast<c10::DeviceIndex>(dev));
    const int64_t after = events();
    const int64_t reserved = int64_t(s.reserved_bytes[all].current);
    // Later syncs skip a device this process never allocated on (a rank's neighbour GPUs); the
    // attach's go for every device, zero or not: the reader's starting point.
    if (!every_device && reserved == 0 && after == 0) continue;
    gpumem_record r;
    std::memset(&r, 0, sizeof r);
    r.action = GPUMEM_ACTION_SYNC;
    r.device = static_cast<int8_t>(dev);
    r.time = static_cast<uint64_t>(c10::getApproximateTime());
    r.address = uint64_t(s.allocated_bytes[all].current);
    r.size = uint64_t(reserved);
    r.stream = uint64_t(s.requested_bytes[all].current);
    r.extra = before == after ? uint64_t(after) : GPUMEM_SYNC_UNSURE;
    r.phase = __atomic_load_n(&h->cur_phase, __ATOMIC_RELAXED);
    r.step = __atomic_load_n(&h->cur_step, __ATOMIC_RELAXED);
    r.range = __atomic_load_n(&h->cur_range, __ATOMIC_RELAXED);
    gpumem_ring_push(h, &r);
    if (point < 0) continue;
    r.action = GPUMEM_ACTION_SYNC_PEAKS;
    r.address = uint64_t(s.allocated_bytes[all].peak);
    r.size = uint64_t(s.reserved_bytes[all].peak);
    r.stream = uint64_t(s.active_bytes[all].current);
    r.extra = uint64_t(point);
    gpumem_ring_push(h, &r);
  }
}

// record_function ranges: ids interned under a small mutex (ranges are rare next to allocator
// events, and this never runs inside the allocator). A process-wide stack, so that allocations made
// by autograd's threads inside a user range are tagged with it too.
std::mutex g_ranges_mutex;
std::unordered_map<std::string, uint32_t> g_range_ids;
std::vector<std::string> g_range_names;  // id - 1 → name
std::vector<uint32_t> g_range_stack;

void push_mark(gpumem_header* h, uint8_t action, uint32_t range, uint64_t extra = 0) {
  gpumem_record r;
  std::memset(&r, 0, sizeof r);
  r.action = action;
  r.extra = extra;
  r.time = static_cast<uint64_t>(c10::getApproximateTime());
  r.phase = __atomic_load_n(&h->cur_phase, __ATOMIC_RELAXED);
  r.step = __atomic_load_n(&h->cur_step, __ATOMIC_RELAXED);
  r.range = range;
  r.device = -1;
  gpumem_ring_push(h, &r);
}

std::unique_ptr<at::ObserverContext> on_range_enter(const at::RecordFunction& fn) {
  gpumem_header* h = g_header.load(std::memory_order_acquire);
  if (!h) return nullptr;
  uint32_t id;
  {
    std::lock_guard<std::mutex> lock(g_ranges_mutex);
    std::string name(fn.name());
    auto it = g_range_ids.find(name);
    if (it == g_range_ids.end()) {
      g_range_names.push_back(name);
      id = static_cast<uint32_t>(g_range_names.size());
      g_range_ids.emplace(std::move(name), id);
    } else {
      id = it->second;
    }
    g_range_stack.push_back(id);
  }
  __atomic_store_n(&h->cur_range, id, __ATOMIC_RELAXED);
  push_mark(h, GPUMEM_ACTION_RANGE_ENTER, id);
  return nullptr;
}

void on_range_exit(const at::RecordFunction& fn, at::ObserverContext*) {
  gpumem_header* h = g_header.load(std::memory_order_acquire);
  if (!h) return;
  uint32_t left = 0, now = 0;
  {
    std::lock_guard<std::mutex> lock(g_ranges_mutex);
    auto it = g_range_ids.find(std::string(fn.name()));
    if (it == g_range_ids.end()) return;
    left = it->second;
    // Ranges close in order on one thread; across threads, remove the innermost of this name.
    for (auto s = g_range_stack.rbegin(); s != g_range_stack.rend(); ++s) {
      if (*s == left) {
        g_range_stack.erase(std::next(s).base());
        break;
      }
    }
    now = g_range_stack.empty() ? 0 : g_range_stack.back();
  }
  __atomic_store_n(&h->cur_range, now, __ATOMIC_RELAXED);
  push_mark(h, GPUMEM_ACTION_RANGE_EXIT, left);
}

at::CallbackHandle g_range_callback = 0;
size_t g_map_size = 0;  // the attached ring's mapping
void* g_retired = nullptr;  // the previous detach's region, anonymous pages now
size_t g_retired_size = 0;

// USER_SCOPE only: torch keeps callbacks per scope, so ops (FUNCTION scope) and autograd nodes
// (BACKWARD_FUNCTION) do not run it.
at::CallbackHandle add_range_callback() {
  return at::addGlobalCallback(
      at::RecordFunctionCallback(on_range_enter, on_range_exit).scopes({at::RecordScope::USER_SCOPE}).needsInputs(false));
}

}  // namespace

extern "C" {

// Map the ring the agent created and start receiving the allocator's events. The caller (the
// agent) has filled the header and seeded the totals. `tracker`: what the tracker does per event
// (enum gpumem_tracker in gpumem_ring.h). 0 or -errno.
int gpumem_hook_attach(const char* ring_path, int tracker) {
  if (g_header.load()) return 0;
  // The agent's own file in its private directory; a link there is never ours to follow.
  int fd = open(ring_path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
  if (fd < 0) return -errno;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  void* map = mmap(nullptr, size_t(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return -errno;
  auto* h = static_cast<gpumem_header*>(map);
  // The agent's own file, checked anyway: every lane must lie inside the mapping.
  const uint32_t lanes = h->n_lanes == 0 ? 1 : h->n_lanes;
  if (uint64_t(st.st_size) < GPUMEM_HEADER_SIZE || h->magic != GPUMEM_RING_MAGIC ||
      h->abi_version != GPUMEM_RING_ABI_VERSION || lanes > GPUMEM_MAX_LANES || h->capacity == 0 ||
      (h->capacity & (h->capacity - 1)) != 0 ||
      uint64_t(st.st_size) < GPUMEM_HEADER_SIZE + uint64_t(lanes) * h->capacity * GPUMEM_RECORD_SIZE) {
    munmap(map, size_t(st.st_size));
    return -EINVAL;
  }
  g_device_lanes.store(lanes - 1, std::memory_order_relaxed);
  g_exact.store(tracker == GPUMEM_TRACKER_EXACT);
  g_empty.store(tracker == GPUMEM_TRACKER_EMPTY);
  h->mode = GPUMEM_MODE_HOOK;
  g_map_size = size_t(st.st_size);
  g_header.store(h, std::memory_order_release);
  // The tracker is registered once per process (torch cannot remove one); the range callback is
  // removed at detach and added again here, so a second attach in the same process works.
  std::call_once(g_tracker_once, [] { cca::attachAllocatorTraceTracker(on_trace); });
  if (!g_range_callback) {
    {
      std::lock_guard<std::mutex> lock(g_ranges_mutex);
      g_range_stack.clear();  // ranges open at a detach never saw their exit
    }
    g_range_callback = add_range_callback();
  }
  push_sync(h, true);  // what was allocated before the hook ran: the reader's starting point
  return 0;
}

// Stop writing (the tracker stays registered with the allocator but finds no header: a flag check
// per event). The address range stays mapped: another thread (autograd's) may be inside on_trace
// with the old pointer right now, and unmapping under it would crash the program; anonymous pages
// replace the ring's, so its file's pages are freed once the agent unlinks it (`gpumem-tui detach`).
void gpumem_hook_detach(void) {
  gpumem_header* h = g_header.exchange(nullptr);
  if (!h) return;
  g_device_lanes.store(0, std::memory_order_relaxed);
  push_sync(h, false);  // the end of the stream, tied to torch's final figures
  h->closed = 1;
  if (g_range_callback) {
    at::removeCallback(g_range_callback);
    g_range_callback = 0;
  }
  // The ring's pages go back to the system while a thread that loaded the old pointer a moment ago
  // (a mark, a range, another device's event) can still store through it: anonymous pages take the
  // mapping's place at once (MAP_FIXED replaces it whole; no gap to fault on). The region retired by
  // the previous detach, a whole attach ago, is unmapped: one is left behind at most.
  void* anon = mmap(h, g_map_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
  if (g_retired && g_retired != h) munmap(g_retired, g_retired_size);
  g_retired = anon == MAP_FAILED ? nullptr : anon;
  g_retired_size = g_map_size;
}

// The allocator's clock against unix time, measured over `ms` milliseconds: two readings of each.
void gpumem_hook_calibrate(int ms, int64_t* base_ticks, int64_t* base_ns, double* ns_per_tick) {
  int64_t t0 = c10::getApproximateTime(), n0 = unix_ns();
  timespec pause{0, long(ms) * 1000000L};
  nanosleep(&pause, nullptr);
  int64_t t1 = c10::getApproximateTime(), n1 = unix_ns();
  *base_ticks = t1;
  *base_ns = n1;
  *ns_per_tick = (t1 != t0) ? double(n1 - n0) / double(t1 - t0) : 1.0;
}

// A phase or step mark from the agent: updates the state stamped on every event and records it.
void gpumem_hook_mark(uint8_t action, uint8_t phase, uint32_t step) {
  gpumem_header* h = g_header.load(std::memory_order_acquire);
  if (!h) return;
  // A step ends: torch's figures at its boundary, stamped with the step that ends.
  if (action == GPUMEM_ACTION_STEP) push_sync(h, false);
  __atomic_store_n(&h->cur_phase, phase, __ATOMIC_RELAXED);
  __atomic_store_n(&h->cur_step, step, __ATOMIC_RELAXED);
  // Entering backward or the optimizer's step, from the thread that called it: its stack, where
  // stacks are on (twice a step). Autograd's engine allocates the gradients on threads without
  // Python frames: this is how a finding about them names the user's lines.
  const bool caller = action == GPUMEM_ACTION_PHASE && (phase == GPUMEM_PHASE_BACKWARD || phase == GPUMEM_PHASE_OPTIMIZER);
  const uint64_t stack = caller && g_stack_min.load(std::memory_order_relaxed) != 0 ? stack_of_alloc() : 0;
  push_mark(h, action, __atomic_load_n(&h->cur_range, __ATOMIC_RELAXED), stack);
}

// A mark with values from the agent (GPUMEM_FEATURE_VALUES): a step's INPUT shape, the allocator's
// LIMIT; stamped with the current phase, step and range. Once a step at most: nothing per event.
void gpumem_hook_value(uint8_t action, int8_t device, uint64_t address, uint64_t size, uint64_t extra) {
  gpumem_header* h = g_header.load(std::memory_order_acquire);
  if (!h) return;
  gpumem_record r;
  std::memset(&r, 0, sizeof r);
  r.action = action;
  r.time = static_cast<uint64_t>(c10::getApproximateTime());
  r.address = address;
  r.size = size;
  r.extra = extra;
  r.phase = __atomic_load_n(&h->cur_phase, __ATOMIC_RELAXED);
  r.step = __atomic_load_n(&h->cur_step, __ATOMIC_RELAXED);
  r.range = __atomic_load_n(&h->cur_range, __ATOMIC_RELAXED);
  r.device = device;
  gpumem_ring_push(h, &r);
}

// A sync point (GPUMEM_TUI_MARKS=hooks): every device's SYNC and SYNC_PEAKS records now, from the
// agent's module, backward and optimizer hooks; `point` is enum gpumem_point. Takes each device's
// allocator lock once (getDeviceStats): a few microseconds, only where the user asked for it.
void gpumem_hook_sync_point(uint32_t point) {
  gpumem_header* h = g_header.load(std::memory_order_acquire);
  if (!h) return;
  push_sync(h, false, int(point & 0xff));
}

// What this build of the hook records beyond the events themselves (GPUMEM_FEATURE_* bits of
// gpumem_ring.h), for the agent's manifest.
uint32_t gpumem_hook_features(void) {
  return (has_mempool<cca::TraceEntry>::value ? GPUMEM_FEATURE_SEGMENT_POOLS : 0u) |
         (gpumem_pystack_supported() ? GPUMEM_FEATURE_ALLOC_STACKS : 0u) | GPUMEM_FEATURE_SYNC_POINTS | GPUMEM_FEATURE_VALUES;
}

// Python stacks for allocations of at least `min_bytes` (0: none) and for smaller ones sampled at
// one per `sample_bytes` allocated (0: none below the threshold), their count and their text
// (cuda/pystack.h). 0, or -ENOSYS where this build does not know the interpreter's frames.
// Also the benchmarks' switch (bench/agent_parts.py: stacks off and on again in one process).
int gpumem_hook_stacks(uint64_t min_bytes, uint64_t sample_bytes) {
  const int rc = gpumem_pystack_enable(min_bytes, sample_bytes);
  if (rc == 0) g_stack_min.store(min_bytes, std::memory_order_relaxed);
  return rc;
}

// What counts as library code beyond the default rule, and what is the user's (pystack.h
// gpumem_pystack_rule): which frames a stack keeps. While stacks are off.
int gpumem_hook_stack_rule(const char* library, const char* user) { return gpumem_pystack_rule(library, user); }

uint32_t gpumem_hook_stack_count(void) { return gpumem_pystack_count(); }

int gpumem_hook_stack_text(uint32_t id, char* buf, int len) { return gpumem_pystack_text(id, buf, len); }

// Range names: count, and name of id (1-based) copied into buf. For the agent's manifest.
uint32_t gpumem_hook_range_count(void) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  return static_cast<uint32_t>(g_range_names.size());
}

int gpumem_hook_range_name(uint32_t id, char* buf, int len) {
  std::lock_guard<std::mutex> lock(g_ranges_mutex);
  if (id == 0 || id > g_range_names.size() || len <= 0) return -1;
  std::snprintf(buf, size_t(len), "%s", g_range_names[id - 1].c_str());
  return 0;
}

// Benchmarks only (bench/agent_parts.py): one part of the hook off or on again inside one process,
// so that its cost is measured against itself with the machine's noise cancelled. Parts:
//   0  the tracker's work: off, it returns at once (as GPUMEM_TRACKER_EMPTY; torch still builds
//      its entry per event and calls us: that cost needs fresh processes, having no detach);
//   1  the record_function callback: off, removed from torch's global callbacks.
// While the tracker is off the ring misses events and its running totals drift: never for
// monitoring. Between steps only (a range open across the switch keeps its stack entry).
// 0, -ENODEV before attach, -EINVAL for an unknown part.
int gpumem_hook_bench_set(int part, int on) {
  if (!g_header.load()) return -ENODEV;
  switch (part) {
    case 0:
      g_empty.store(!on, std::memory_order_relaxed);
      return 0;
    case 1:
      if (on && !g_range_callback) {
        g_range_callback = add_range_callback();
      } else if (!on && g_range_callback) {
        at::removeCallback(g_range_callback);
        g_range_callback = 0;
      }
      return 0;
    default:
      return -EINVAL;
  }
}

}  // extern "C"
