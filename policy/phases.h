// Start-up phase inference for vLLM/SGLang-like engines, from the event stream of one device.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "policy/events.h"

namespace kvremap::policy {

enum class Phase : std::uint8_t { init, loading, profiling, kv_allocation, post_kv_warmup, capture, serving };
std::string_view to_string(Phase phase);

// Thresholds of the rules below. The defaults fit real vLLM V1 and SGLang start-ups on 16-192 GiB GPUs.
struct PhaseRules {
  // A memory query counts as "weights are in" when at least this much was allocated since the
  // previous query. 64 MiB: below the smallest real model (opt-125m, ~240 MiB), above stray buffers.
  std::uint64_t weights_min_bytes = 64ull << 20;
  // Kernel launches after the post-weights query that make a forward pass (profiling). A profiling
  // pass of any real model launches hundreds; SGLang launches a handful of fill kernels before its KV pool.
  std::uint32_t profiling_min_kernels = 64;
  // A KV burst: at least kv_min_allocations allocations of one size >= kv_min_bytes, one after
  // another, together at least kv_min_free_fraction of the free memory the sizing query returned.
  std::uint64_t kv_min_bytes = 64ull << 20;
  std::uint32_t kv_min_allocations = 3;
  double kv_min_free_fraction = 0.02;
  // A KV cache in one allocation: a single allocation of at least this fraction of the free memory
  // the sizing query returned is a KV burst by itself. vLLM >= 0.29 backs all layers with one
  // allocation (ENGINES-2026.md finding 2), SGLang's unified pool is one torch.empty; with vLLM's
  // default utilisation the cache takes 50-90% of that free memory. What else follows the sizing
  // query (attention workspaces, SGLang's req_to_token) is a few percent of it at most.
  double kv_single_min_free_fraction = 0.25;
  // torch.zeros launches one fill kernel per KV tensor: that many kernels between two KV allocations
  // keep the burst going; more end it.
  std::uint32_t kv_max_kernels_between = 4;
  // observe_idle: this long without any event after KV means start-up work is over (eager engines).
  // Long, because torch.compile can spend tens of seconds on the CPU between CUDA calls.
  std::uint64_t idle_quiet_ns = 60'000'000'000ull;
};

struct PhaseChange {
  Phase from;
  Phase to;
  std::string reason;      // one line for logs and the trace's phase marker
  std::uint64_t since_ns;  // when the new phase began: for a KV burst, its first allocation
};

// Rules, one transition each; phases only move forward and serving is final.
//  init -> loading: the first allocation.
//  loading: the first memory query is the baseline. A later query with >= weights_min_bytes allocated
//    since the query before it, and written since then — >= weights_min_bytes copied into device
//    memory, or profiling_min_kernels kernel launches (dummy weights are initialised by kernels) —
//    is the post-weights query. Allocations nothing wrote are not weights: SGLang queries right after
//    its NCCL initialisation (model_runner.py:1350, pre_model_load_memory), whose buffers are
//    cudaMallocs of 64 MiB and more with NCCL_CUMEM_ENABLE=0, and then twice more before its weights.
//    Weight-sized runs of identical tensors
//    (MoE experts) come before it and can never be taken for KV. In loading, the KV window opens at
//    the next query (SGLang queries when loading ends and again to size its pool), not at the
//    post-weights query itself: that one is vLLM's "before profile" query, and the profiling
//    activations that follow must stay out of the arena. (Kernel counts cannot tell a forward pass
//    from weight post-processing, so a query after an unannounced forward pass does not open it.)
//  loading -> profiling: profiling_min_kernels kernel launches after the post-weights query with no
//    query or KV burst in between (vLLM's profile_run, preceded by its "before profile" query).
//    Engines that query only before and after profiling go loading -> kv_allocation once they query
//    a second time after the weights.
//  -> kv_allocation (from loading after the post-weights query, SGLang; or from profiling after a
//    query taken during profiling, vLLM's "after profile" sizing query): a KV burst as defined in
//    PhaseRules (a run of equal allocations, or one allocation holding the whole cache), with no
//    capture open. Activations of the profiling pass precede that query, and runs
//    of identical activations are far below kv_min_free_fraction of free memory.
//    Allocations made while a capture is open (graph pools) never count, so vLLM's graph-memory
//    estimate, which captures during profiling, leaves the phase at profiling.
//  The KV window closes once profiling_min_kernels kernel launches (outside captures) have run while
//    it was open and no KV burst was recognised: a forward pass ran after the sizing query, so
//    whatever it allocates is activations, never KV (a one-allocation KV cache smaller than
//    kv_single_min_free_fraction is no burst; the compile warm-up after it allocates runs of equal
//    buffers). It opens again when a capture ends, provided the window's second memory query came
//    before any forward pass closed it: that is vLLM V1's graph-memory profiling
//    (gpu_worker.py:524-528 runs profile_cudagraph_memory right after the sizing snapshot;
//    gpu_model_runner.py:6780-6935: a minimal KV cache, graph_capture()'s synchronize and
//    empty_cache, then per descriptor a query, an eager warm-up, a capture and a query), after which
//    the real KV cache comes. Where the KV cache itself follows the sizing query (vLLM >= 0.29's
//    Model Runner V2), the compile and kernel warm-ups run before the next query, so a window they
//    closed stays closed for good; so it does in loading (SGLang sizes its pool without profiling).
//  kv_allocation, post_kv_warmup or capture -> the phase before the burst: rearm_kv(), when every KV
//    tensor of the burst was freed before any commit. That burst was a profiling KV cache (vLLM V1's
//    _init_minimal_kv_cache_for_profiling, gpu_model_runner.py:6633-6660, freed by
//    _cleanup_profiling_kv_cache, :6709-6739, before the real one is allocated): the KV window opens
//    again and the next burst is recognised as if the first had not been. The one move backwards.
//  kv_allocation -> post_kv_warmup: a module load, an allocation of another size, or more than
//    kv_max_kernels_between kernel launches after the last KV allocation.
//  kv_allocation or post_kv_warmup -> capture: the first capture begun after the KV burst.
//  capture -> serving: a graph launch with no capture open, after at least one capture ended. Queries
//    and eager warm-up launches between captures keep the phase at capture.
//  post_kv_warmup or capture (none open) -> serving: observe_idle after idle_quiet_ns without events.
// Frees, graph instantiations and launches outside these rules never change the phase.
// One tracker per device; not thread-safe (the interposer serialises a device's events).
class PhaseTracker {
 public:
  explicit PhaseTracker(PhaseRules rules = {}) : rules_(rules) {}

  std::optional<PhaseChange> observe(const Event& event);
  // Called by the interposer from time to time (any thread, under its lock) for eager engines that
  // never capture; now_ns on the same clock as Event::time_ns.
  std::optional<PhaseChange> observe_idle(std::uint64_t now_ns);
  // Every KV tensor of the recognised burst was freed before the commit (see the rules above); no
  // change outside kv_allocation, post_kv_warmup and capture, or while a capture is open.
  std::optional<PhaseChange> rearm_kv(std::uint64_t now_ns);

  Phase current() const { return phase_; }
  // Whether the next allocation must be observed as an event of its own. When false, only its size
  // matters (the weights rule sums bytes between queries): the interposer adds sizes up without
  // taking its lock and folds the sum in with observe_allocated_bytes() before the next event.
  bool needs_each_allocation() const {
    return phase_ == Phase::init || (open_captures_.empty() && (kv_eligible() || phase_ == Phase::kv_allocation));
  }
  // Allocations of `bytes` in total, none of which needed observing on its own, the last at time_ns.
  void observe_allocated_bytes(std::uint64_t bytes, std::uint64_t time_ns);
  // KV placement: an allocation now may be part of the KV cache (its sizing query has been seen,
  // no capture is open, or the KV burst is under way).
  bool kv_window() const { return kv_eligible() || (phase_ == Phase::kv_allocation && open_captures_.empty()); }
  // kv_window() as it will be once `launches` more kernel launches, not yet observed, are: the
  // interposer counts launches without its lock and feeds them before the next event, but an
  // allocation's placement is decided before that event is fed.
  bool kv_window_after(std::uint32_t launches) const {
    if (kv_eligible()) return eager_kernels_in_window_ + std::uint64_t{launches} < rules_.profiling_min_kernels;
    return kv_window();
  }
  // The size of each tensor of the recognised KV burst; 0 until one has been recognised.
  std::uint64_t kv_tensor_bytes() const { return kv_tensor_bytes_; }
  // Whether a memory query taken now may be the one the engine sizes its KV cache from: any query
  // before the KV burst, except that in profiling only the first counts. vLLM takes its sizing
  // snapshot right after the profiling forward (gpu_worker.py:515-520, memory_profiling's exit) and
  // queries again while it profiles graph memory (gpu_model_runner.py:6857-6885) before allocating
  // the KV cache: the last query before the burst is not the sizing one there.
  bool next_query_may_size_kv() const {
    return phase_ < Phase::kv_allocation && !(phase_ == Phase::profiling && profiling_query_seen_);
  }
  const PhaseRules& rules() const { return rules_; }

 private:
  struct KvRun {
    std::uint64_t bytes = 0;  // size of each allocation in the run; 0 = no run
    std::uint32_t count = 0;
    std::uint64_t first_ns = 0;
    std::uint32_t kernels_since_last = 0;
  };

  std::optional<PhaseChange> on_alloc(const Event& event, const Alloc& alloc);
  std::optional<PhaseChange> on_query(const Event& event, const MemoryQuery& query);
  std::optional<PhaseChange> on_kernel(const Event& event);
  std::optional<PhaseChange> on_capture_begin(const Event& event, const CaptureBegin& begin);
  std::optional<PhaseChange> on_graph_launch(const Event& event);
  bool kv_eligible() const;
  bool window_opened() const;  // the sizing query has been seen, no KV burst recognised (open or closed)
  void reopen_after_graph_profiling();
  PhaseChange move_to(Phase to, std::string reason, std::uint64_t since_ns);

  PhaseRules rules_;
  Phase phase_ = Phase::init;
  std::uint64_t last_event_ns_ = 0;
  bool seen_event_ = false;

  std::uint32_t queries_ = 0;
  std::uint64_t bytes_since_query_ = 0;
  std::uint32_t kernels_since_query_ = 0;
  std::uint64_t first_kernel_since_query_ns_ = 0;
  std::uint64_t last_query_free_ = 0;
  bool weights_in_ = false;                    // the post-weights query has been seen
  bool sizing_query_seen_ = false;             // loading: a query the KV cache may be sized from (see kv_eligible)
  bool profiling_query_seen_ = false;          // a query was taken during profiling: KV may follow
  std::uint32_t eager_kernels_in_window_ = 0;  // launches outside captures while the KV window was open
  bool kv_window_closed_ = false;              // a forward pass ran in the window: no KV burst now
  std::uint32_t queries_in_window_ = 0;        // memory queries since the window opened
  bool graph_profiling_ = false;               // the window's second query came before it closed

  KvRun run_;  // during kv_allocation: the burst itself
  std::uint64_t kv_tensor_bytes_ = 0;

  std::set<std::uint64_t> open_captures_;
  std::uint32_t captures_ended_ = 0;  // since the capture phase began
};

}  // namespace kvremap::policy
