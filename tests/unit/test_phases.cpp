// Unit tests for policy/phases: synthetic vLLM, SGLang and eager start-ups fed event by event.
#include "policy/phases.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;

// Feeds events 1 ms apart and records every phase change.
class Engine {
 public:
  explicit Engine(PhaseRules rules = {}) : tracker(rules) {}

  void alloc(std::uint64_t bytes) { feed(Alloc{next_ptr_ += bytes, bytes, Category::other, "cudaMalloc"}); }
  void free_(std::uint64_t bytes) { feed(Free{next_ptr_, bytes, Category::other}); }
  void query(std::uint64_t free_bytes, std::uint64_t total = 80 * GiB) {
    feed(MemoryQuery{free_bytes, total, free_bytes, total, std::nullopt});  // copies unknown: the rule as before
  }
  void kernels(int n) {
    for (int i = 0; i < n; ++i) feed(KernelLaunch{});
  }
  void zeros(std::uint64_t bytes) {  // torch.zeros: an allocation and its fill kernel
    alloc(bytes);
    kernels(1);
  }
  void capture(std::uint64_t id, std::uint64_t pool_bytes = 0) {
    feed(CaptureBegin{id, CaptureMode::relaxed});
    if (pool_bytes) alloc(pool_bytes);
    kernels(20);
    feed(CaptureEnd{id, true});
    feed(GraphInstantiate{8 * MiB});
  }
  void graph_launch() { feed(GraphLaunch{}); }
  void module_load() { feed(ModuleLoad{1 * MiB}); }

  // vLLM V1 / SGLang weights: ~300 tensors of mixed sizes, with long runs of identical expert tensors.
  void load_weights(int layers = 48) {
    zeros(300 * MiB);  // embedding
    for (int layer = 0; layer < layers; ++layer) {
      zeros(48 * MiB);                                              // qkv
      zeros(32 * MiB);                                              // o_proj
      for (int expert = 0; expert < 4; ++expert) zeros(112 * MiB);  // identical expert tensors
      zeros(2 * MiB);                                               // norms
    }
    kernels(10);  // process_weights_after_loading
  }

  void feed(EventKind kind) {
    now_ += 1'000'000;
    fed.push_back(kind);
    if (auto change = tracker.observe(Event{now_, 1, 0, std::move(kind)})) changes.push_back(*change);
  }
  std::vector<Phase> path() const {
    std::vector<Phase> out{Phase::init};
    for (const auto& change : changes) out.push_back(change.to);
    return out;
  }
  std::uint64_t now() const { return now_; }

  PhaseTracker tracker;
  std::vector<PhaseChange> changes;
  std::vector<EventKind> fed;  // every event, in order

 private:
  std::uint64_t now_ = 0;
  std::uint64_t next_ptr_ = 0x7f0000000000;
};

using P = Phase;

// vLLM V1: baseline, NCCL, weights, "before profile" query, profile_run, "after profile" sizing query.
void vllm_until_sized(Engine& e, bool graph_estimate = false) {
  e.query(79 * GiB);
  e.alloc(200 * MiB);  // NCCL buffers
  e.kernels(3);        // NCCL warm-up all-reduce
  e.load_weights();
  e.query(50 * GiB);                          // memory_profiling(): before_profile
  for (int layer = 0; layer < 48; ++layer) {  // profile_run: activations, many kernels
    if (layer < 4) e.zeros(64 * MiB);
    e.kernels(12);
  }
  if (graph_estimate) {
    e.query(46 * GiB);
    e.kernels(30);  // eager warm-up before the estimate capture
    e.capture(900, 512 * MiB);
    e.capture(901, 512 * MiB);
    e.query(45 * GiB);
  }
  for (int i = 0; i < 10; ++i) e.free_(64 * MiB);  // empty_cache
  e.query(46 * GiB);                               // after_profile: the sizing query
}

void vllm_kv_and_capture(Engine& e) {
  e.zeros(16 * MiB);                                            // block tables
  for (int layer = 0; layer < 48; ++layer) e.zeros(800 * MiB);  // one KV tensor per layer
  e.alloc(256 * MiB);                                           // FlashInfer workspace
  e.module_load();
  e.kernels(200);    // compile for batch sizes, autotuning
  e.query(6 * GiB);  // before the capture loop
  for (std::uint64_t size = 0; size < 60; ++size) {
    e.kernels(15);  // eager warm-up runs
    e.capture(size, size == 0 ? 1 * GiB : 0);
  }
  e.query(5 * GiB);  // "Graph capturing finished"
  e.kernels(5);      // sampler warm-up
  e.graph_launch();  // first request
}

}  // namespace

TEST(Phases, NamesAreStable) {
  EXPECT_EQ(to_string(P::init), "init");
  EXPECT_EQ(to_string(P::loading), "loading");
  EXPECT_EQ(to_string(P::profiling), "profiling");
  EXPECT_EQ(to_string(P::kv_allocation), "kv_allocation");
  EXPECT_EQ(to_string(P::post_kv_warmup), "post_kv_warmup");
  EXPECT_EQ(to_string(P::capture), "capture");
  EXPECT_EQ(to_string(P::serving), "serving");
  EXPECT_EQ(to_string(Category::graph_pool), "graph_pool");
  EXPECT_EQ(category_from_string("async_pool"), Category::async_pool);
  EXPECT_FALSE(category_from_string("weights"));
}

TEST(Phases, VllmV1StartUpGoesThroughEveryPhase) {
  Engine e;
  vllm_until_sized(e);
  EXPECT_EQ(e.tracker.current(), P::profiling);
  vllm_kv_and_capture(e);
  EXPECT_EQ(e.path(), (std::vector<Phase>{P::init, P::loading, P::profiling, P::kv_allocation, P::post_kv_warmup,
                                          P::capture, P::serving}));
}

TEST(Phases, IdenticalExpertWeightsAreNotKv) {
  Engine e;
  e.query(79 * GiB);
  e.load_weights();
  EXPECT_EQ(e.tracker.current(), P::loading);
}

TEST(Phases, KvBurstStartsAtItsFirstAllocation) {
  Engine e;
  vllm_until_sized(e);
  e.zeros(16 * MiB);
  const std::uint64_t before_kv = e.now();
  for (int layer = 0; layer < 48; ++layer) e.zeros(800 * MiB);
  ASSERT_EQ(e.changes.size(), 3u);
  EXPECT_EQ(e.changes[2].to, P::kv_allocation);
  EXPECT_EQ(e.changes[2].since_ns, before_kv + 1'000'000);
  EXPECT_NE(e.changes[2].reason.find("800.00 MiB"), std::string::npos) << e.changes[2].reason;
  EXPECT_EQ(e.tracker.current(), P::kv_allocation);  // fill kernels between KV tensors do not end it
}

TEST(Phases, VllmGraphMemoryEstimateDuringProfilingStaysInProfiling) {
  Engine e;
  vllm_until_sized(e, /*graph_estimate=*/true);
  EXPECT_EQ(e.tracker.current(), P::profiling);
  vllm_kv_and_capture(e);
  EXPECT_EQ(e.path(), (std::vector<Phase>{P::init, P::loading, P::profiling, P::kv_allocation, P::post_kv_warmup,
                                          P::capture, P::serving}));
}

// vLLM V1's graph-memory profiling after its sizing snapshot (ENGINES-2026.md sequence B, findings 3
// and 7; gpu_worker.py:515-528, gpu_model_runner.py:6780-6935): a minimal KV cache of a few MiB per
// layer, graph_capture()'s synchronize and empty_cache, then per mode two descriptors, each a query,
// an eager warm-up and a capture, and a query; everything freed; then the real KV cache. The warm-ups
// close the KV window, each capture's end opens it again, and the real per-layer tensors are the
// burst. Only the first query after the profiling forward may size the KV cache.
void vllm_v1_graph_profiling(Engine& e) {
  for (int layer = 0; layer < 48; ++layer) e.zeros(4 * MiB);  // _init_minimal_kv_cache_for_profiling
  for (int i = 0; i < 4; ++i) {                               // PIECEWISE, then FULL: two descriptors each
    EXPECT_FALSE(e.tracker.next_query_may_size_kv());
    e.query(45 * GiB);
    e.alloc(1 * GiB);  // the warm-up's activations
    e.kernels(100);
    EXPECT_FALSE(e.tracker.kv_window()) << "a forward pass closes it";
    e.capture(910 + static_cast<std::uint64_t>(i), 256 * MiB);
    EXPECT_TRUE(e.tracker.kv_window()) << "graph-memory profiling: open again";
    e.query(44 * GiB);
  }
}

TEST(Phases, VllmV1GraphMemoryProfilingKeepsTheSizingQueryAndTheKvWindow) {
  Engine e;
  vllm_until_sized(e);
  EXPECT_FALSE(e.tracker.next_query_may_size_kv()) << "the after-profile snapshot was the sizing query";
  vllm_v1_graph_profiling(e);
  vllm_kv_and_capture(e);
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 800 * MiB);
  EXPECT_EQ(e.path(), (std::vector<Phase>{P::init, P::loading, P::profiling, P::kv_allocation, P::post_kv_warmup,
                                          P::capture, P::serving}));

  // Model Runner V2 with a one-allocation KV cache too small to be recognised: the compile warm-up
  // closes the window before the next query, and the captures after it never open it again.
  Engine mrv2;
  vllm_until_sized(mrv2);
  mrv2.zeros(8 * GiB);
  mrv2.kernels(100);
  mrv2.query(30 * GiB);
  for (std::uint64_t size = 0; size < 4; ++size) {
    mrv2.kernels(15);
    mrv2.capture(size);
  }
  EXPECT_FALSE(mrv2.tracker.kv_window());
  for (int i = 0; i < 4; ++i) mrv2.alloc(1 * GiB);  // serving's activations
  EXPECT_EQ(mrv2.tracker.kv_tensor_bytes(), 0u);
  EXPECT_EQ(mrv2.tracker.current(), P::profiling);
}

// An MHA model's minimal KV cache reaches 64 MiB per layer: it is a KV burst. Once every tensor of it
// is freed before the commit, rearm_kv() returns to profiling and the real KV cache is the burst.
TEST(Phases, AProfilingKvCacheFreedBeforeItsCommitRearmsRecognition) {
  Engine e;
  vllm_until_sized(e);
  EXPECT_FALSE(e.tracker.rearm_kv(e.now())) << "no burst yet: nothing to re-arm";
  for (int layer = 0; layer < 48; ++layer) e.zeros(128 * MiB);  // the minimal KV cache
  e.query(40 * GiB);
  EXPECT_EQ(e.tracker.current(), P::kv_allocation);
  e.kernels(100);
  e.feed(CaptureBegin{7, CaptureMode::relaxed});
  EXPECT_FALSE(e.tracker.rearm_kv(e.now())) << "never while a capture is open";
  e.feed(CaptureEnd{7, true});
  const auto change = e.tracker.rearm_kv(e.now());
  ASSERT_TRUE(change.has_value());
  EXPECT_EQ(change->from, P::capture);
  EXPECT_EQ(change->to, P::profiling);
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 0u);
  EXPECT_TRUE(e.tracker.kv_window());
  for (int layer = 0; layer < 48; ++layer) e.zeros(800 * MiB);  // the real KV cache
  EXPECT_EQ(e.tracker.current(), P::kv_allocation);
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 800 * MiB);
}

// SGLang sizes its pool without profiling: a capture never reopens a window its warm-ups closed, even
// when a query followed the sizing one at once ("Memory pool end" after KV buffers too small to count).
TEST(Phases, SglangNeverReopensTheKvWindow) {
  Engine e;
  e.query(79 * GiB);
  e.load_weights();
  e.query(50 * GiB);
  e.query(50 * GiB);                                   // the sizing query
  for (int i = 0; i < 2 * 48; ++i) e.zeros(32 * MiB);  // KV buffers below 64 MiB: no burst
  e.query(47 * GiB);                                   // "Memory pool end"
  e.kernels(100);                                      // attention backends' warm-up
  e.capture(1);
  EXPECT_FALSE(e.tracker.kv_window());
}

TEST(Phases, ProfilingActivationsOfOneSizeAreNotKv) {
  Engine e;
  e.query(79 * GiB);
  e.load_weights();
  e.query(50 * GiB);
  e.kernels(64);
  ASSERT_EQ(e.tracker.current(), P::profiling);
  for (int i = 0; i < 8; ++i) e.zeros(128 * MiB);  // no sizing query yet: activations
  EXPECT_EQ(e.tracker.current(), P::profiling);
  e.query(45 * GiB);
  for (int i = 0; i < 4; ++i) e.zeros(64 * MiB);  // 256 MiB: under 2% of 45 GiB free
  EXPECT_EQ(e.tracker.current(), P::profiling);
  for (int i = 0; i < 12; ++i) e.zeros(1 * GiB);
  EXPECT_EQ(e.tracker.current(), P::kv_allocation);
}

TEST(Phases, SglangGoesFromLoadingStraightToKv) {
  Engine e;
  e.alloc(100 * MiB);  // NCCL before the baseline
  e.query(79 * GiB);   // baseline
  e.load_weights();
  e.query(50 * GiB);                                    // "Load weight end"
  e.query(50 * GiB);                                    // profile_max_num_token
  e.zeros(40 * MiB);                                    // req_to_token_pool
  e.kernels(2);                                         // free-slot arange etc.
  for (int i = 0; i < 2 * 48; ++i) e.zeros(400 * MiB);  // k_buffer and v_buffer per layer
  e.query(8 * GiB);                                     // "Memory pool end"
  e.alloc(32 * MiB);                                    // cuBLAS workspace
  e.kernels(4);
  for (std::uint64_t bs = 0; bs < 30; ++bs) {
    e.kernels(20);
    e.capture(bs, bs == 0 ? 512 * MiB : 0);
  }
  e.graph_launch();
  EXPECT_EQ(e.path(),
            (std::vector<Phase>{P::init, P::loading, P::kv_allocation, P::post_kv_warmup, P::capture, P::serving}));
}

// SGLang with TP > 1 as it starts today (ENGINES-2026.md sequence D, model_runner.py:1350-1375): a baseline,
// NCCL's buffers (cudaMallocs with NCCL_CUMEM_ENABLE=0, hundreds of MiB), pre_model_load_memory (the minimum
// over ranks, then the local query), two more queries before the weights, the weights copied in, "Load
// weight end", the sizing query, the pool. NCCL's buffers are not weights: nothing was copied into them
// and no forward ran, so the KV window stays shut while the weights load and opens after them.
TEST(Phases, SglangNcclBuffersBeforeItsWeightsAreNotTheWeights) {
  for (const bool dummy : {false, true}) {
    SCOPED_TRACE(dummy ? "dummy weights, initialised by kernels" : "weights copied from the checkpoint");
    Engine e;
    auto query = [&](std::uint64_t free_bytes, std::uint64_t copied) {
      e.feed(MemoryQuery{free_bytes, 80 * GiB, free_bytes, 80 * GiB, copied});
    };
    query(79 * GiB, 0);                              // baseline
    for (int i = 0; i < 3; ++i) e.alloc(256 * MiB);  // NCCL buffers and custom all-reduce
    e.kernels(3);                                    // a barrier all-reduce
    for (int i = 0; i < 4; ++i) query(78 * GiB, 0);  // pre_model_load (min, local), load weight begin
    EXPECT_FALSE(e.tracker.kv_window()) << "the NCCL buffers are not the weights";
    e.alloc(300 * MiB);  // embedding
    for (int layer = 0; layer < 48; ++layer) {
      e.alloc(48 * MiB);
      for (int expert = 0; expert < 4; ++expert) e.alloc(112 * MiB);  // identical expert tensors
      EXPECT_FALSE(e.tracker.kv_window()) << "no weight is a KV candidate";
    }
    if (dummy) e.kernels(500);              // initialize_dummy_weights: one kernel per tensor
    query(50 * GiB, dummy ? 0 : 24 * GiB);  // "Load weight end"
    query(50 * GiB, 0);                     // the sizing query
    EXPECT_TRUE(e.tracker.kv_window());
    for (int i = 0; i < 2 * 48; ++i) e.zeros(400 * MiB);  // k_buffer and v_buffer per layer
    e.alloc(32 * MiB);                                    // cuBLAS workspace
    EXPECT_EQ(e.path(), (std::vector<Phase>{P::init, P::loading, P::kv_allocation, P::post_kv_warmup}));
    EXPECT_EQ(e.tracker.kv_tensor_bytes(), 400 * MiB);
  }
}

// SGLang --enable-unified-memory: one torch.empty byte buffer for the whole pool
// (mem_cache/unified_memory_pool.py:216), no fill kernel; a large req_to_token (long context) before it.
TEST(Phases, SglangUnifiedPoolInOneAllocationIsTheBurst) {
  Engine e;
  e.query(79 * GiB);
  e.load_weights();
  e.query(50 * GiB);  // "Load weight end"
  e.query(50 * GiB);  // profile_max_num_token
  e.zeros(2 * GiB);   // req_to_token_pool: int32 (max_reqs + 1) x context, 4% of the free memory
  EXPECT_EQ(e.tracker.current(), P::loading);
  e.alloc(40 * GiB);  // the unified pool
  e.alloc(64 * MiB);  // the multi-ended allocator's free lists
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 40 * GiB);
  EXPECT_EQ(e.path(), (std::vector<Phase>{P::init, P::loading, P::kv_allocation, P::post_kv_warmup}));
}

TEST(Phases, EagerEngineReachesServingOnlyAfterAQuietPeriod) {
  PhaseRules rules;
  rules.idle_quiet_ns = 5'000'000'000;
  Engine e(rules);
  vllm_until_sized(e);
  for (int layer = 0; layer < 32; ++layer) e.zeros(1 * GiB);
  e.kernels(100);
  ASSERT_EQ(e.tracker.current(), P::post_kv_warmup);
  EXPECT_FALSE(e.tracker.observe_idle(e.now() + 4'999'999'999));
  const auto change = e.tracker.observe_idle(e.now() + 5'000'000'000);
  ASSERT_TRUE(change);
  EXPECT_EQ(change->from, P::post_kv_warmup);
  EXPECT_EQ(change->to, P::serving);
  EXPECT_EQ(e.tracker.current(), P::serving);
}

TEST(Phases, IdleBeforeKvNeverMeansServing) {
  Engine e;
  EXPECT_FALSE(e.tracker.observe_idle(1'000'000'000'000));
  e.query(79 * GiB);
  e.load_weights();  // torch.compile may think for minutes here
  EXPECT_FALSE(e.tracker.observe_idle(e.now() + 3'600'000'000'000));
  EXPECT_EQ(e.tracker.current(), P::loading);
}

TEST(Phases, QueriesAndLaunchesBetweenCapturesStayInCapture) {
  Engine e;
  vllm_until_sized(e);
  for (int layer = 0; layer < 32; ++layer) e.zeros(1 * GiB);
  e.capture(1);
  ASSERT_EQ(e.tracker.current(), P::capture);
  e.query(5 * GiB);
  e.kernels(50);
  e.feed(CaptureBegin{2, CaptureMode::global});
  e.graph_launch();  // replay inside another capture: still capturing
  e.feed(CaptureEnd{2, true});
  EXPECT_EQ(e.tracker.current(), P::capture);
  e.graph_launch();
  EXPECT_EQ(e.tracker.current(), P::serving);
}

TEST(Phases, AllocationsInsideCaptureNeverFormAKvBurst) {
  Engine e;
  vllm_until_sized(e);
  e.feed(CaptureBegin{7, CaptureMode::relaxed});
  for (int i = 0; i < 20; ++i) e.alloc(1 * GiB);
  e.feed(CaptureEnd{7, false});
  EXPECT_EQ(e.tracker.current(), P::profiling);
}

TEST(Phases, KvBurstEndsAtADifferentSizeOrAModuleLoad) {
  {
    Engine e;
    vllm_until_sized(e);
    for (int layer = 0; layer < 32; ++layer) e.zeros(1 * GiB);
    e.alloc(4 * MiB);
    EXPECT_EQ(e.tracker.current(), P::post_kv_warmup);
    EXPECT_NE(e.changes.back().reason.find("4.00 MiB"), std::string::npos);
  }
  {
    Engine e;
    vllm_until_sized(e);
    for (int layer = 0; layer < 32; ++layer) e.zeros(1 * GiB);
    e.module_load();
    EXPECT_EQ(e.tracker.current(), P::post_kv_warmup);
  }
}

TEST(Phases, KernelsBetweenLargeAllocationsBreakTheRun) {
  Engine e;
  vllm_until_sized(e);
  for (int i = 0; i < 10; ++i) {
    e.alloc(1 * GiB);
    e.kernels(5);  // more than a fill kernel: a forward pass, not torch.zeros
  }
  EXPECT_EQ(e.tracker.current(), P::profiling);
}

TEST(Phases, ServingIsFinalAndEmptyStreamStaysInInit) {
  Engine e;
  e.query(79 * GiB);
  e.kernels(100);
  e.graph_launch();
  EXPECT_EQ(e.tracker.current(), P::init);
  vllm_until_sized(e);
  vllm_kv_and_capture(e);
  ASSERT_EQ(e.tracker.current(), P::serving);
  const std::size_t changes = e.changes.size();
  e.capture(1000, 1 * GiB);
  e.query(1 * GiB);
  for (int i = 0; i < 10; ++i) e.zeros(1 * GiB);
  EXPECT_EQ(e.tracker.current(), P::serving);
  EXPECT_EQ(e.changes.size(), changes);
}

TEST(Phases, ProfilingChangeIsDatedAtTheFirstKernelAfterTheQuery) {
  Engine e;
  e.query(79 * GiB);
  e.load_weights();
  e.query(50 * GiB);
  const std::uint64_t first_kernel = e.now() + 1'000'000;
  e.kernels(64);
  ASSERT_EQ(e.tracker.current(), P::profiling);
  EXPECT_EQ(e.changes.back().since_ns, first_kernel);
  EXPECT_EQ(e.changes.back().from, P::loading);
}

namespace {

// The KV window: vLLM's "before profile" query does not open it (the profiling activations that
// follow stay out of the arena); the query taken during profiling does; SGLang's second query
// after loading does. An engine that queries only before the weights and after an unannounced
// forward pass opens it at its next query (or names its KV size: KVREMAP_KV_TENSOR_BYTES).
TEST(Phases, KvWindowOpensAtTheSizingQueryOnly) {
  Engine v;
  v.query(79 * GiB);
  v.load_weights();
  v.query(50 * GiB);  // before_profile
  EXPECT_FALSE(v.tracker.kv_window()) << "profiling activations come next";
  v.zeros(64 * MiB);
  v.kernels(100);
  EXPECT_EQ(v.tracker.current(), P::profiling);
  EXPECT_FALSE(v.tracker.kv_window());
  v.query(46 * GiB);  // after_profile
  EXPECT_TRUE(v.tracker.kv_window());

  Engine s;
  s.query(79 * GiB);
  s.load_weights();
  s.query(50 * GiB);  // "Load weight end"
  EXPECT_FALSE(s.tracker.kv_window());
  s.query(50 * GiB);  // profile_max_num_token
  EXPECT_TRUE(s.tracker.kv_window());

  Engine only_after;  // queries before the weights and after profiling, nothing in between
  only_after.query(79 * GiB);
  only_after.load_weights();
  for (int layer = 0; layer < 48; ++layer) only_after.kernels(12);
  only_after.query(46 * GiB);
  EXPECT_FALSE(only_after.tracker.kv_window()) << "indistinguishable from vLLM's before-profile query";
  only_after.query(46 * GiB);
  EXPECT_TRUE(only_after.tracker.kv_window());
}

// vLLM >= 0.29 backs the whole KV cache with one allocation (ENGINES-2026.md sequence A, finding 2):
// one allocation of a large share of the sizing query's free memory is the KV burst by itself. The
// compile warm-up after it allocates runs of equal activation buffers >= 64 MiB while its forward runs:
// the burst is over by then, so they are never taken for KV.
TEST(Phases, OneAllocationHoldingTheWholeKvCacheIsTheBurst) {
  Engine e;
  vllm_until_sized(e);  // the sizing query returned 46 GiB free
  ASSERT_TRUE(e.tracker.kv_window());
  e.alloc(256 * MiB);  // attention workspaces: not a KV cache by themselves
  EXPECT_EQ(e.tracker.current(), P::profiling);
  e.zeros(40 * GiB);  // torch.zeros(int8, L x blocks x page): the one KV allocation
  EXPECT_EQ(e.tracker.current(), P::kv_allocation);
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 40 * GiB);
  ASSERT_FALSE(e.changes.empty());
  EXPECT_NE(e.changes.back().reason.find("one allocation of 40.00 GiB (86% of the free memory"), std::string::npos)
      << e.changes.back().reason;
  e.kernels(100);  // dummy runs for the compile sizes
  EXPECT_EQ(e.tracker.current(), P::post_kv_warmup);
  for (int i = 0; i < 4; ++i) e.alloc(1 * GiB);  // activation buffers of one size
  EXPECT_FALSE(e.tracker.kv_window());
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 40 * GiB);

  // Just under a quarter of the free memory: a workspace as far as the rules know, never a burst.
  Engine small;
  vllm_until_sized(small);
  small.zeros(46 * GiB / 4 - 2 * MiB);
  EXPECT_EQ(small.tracker.current(), P::profiling);
  EXPECT_EQ(small.tracker.kv_tensor_bytes(), 0u);
}

// A one-allocation KV cache too small to be recognised (a low utilisation): the forward pass after it
// closes the KV window, so the compile warm-up's equal activation buffers are never taken for KV.
TEST(Phases, AForwardPassAfterTheSizingQueryClosesTheKvWindow) {
  Engine e;
  vllm_until_sized(e);
  ASSERT_TRUE(e.tracker.kv_window());
  e.zeros(8 * GiB);  // the one KV allocation, 17% of the free memory
  EXPECT_TRUE(e.tracker.kv_window());
  EXPECT_FALSE(e.tracker.kv_window_after(100)) << "launches not yet observed count";
  EXPECT_TRUE(e.tracker.kv_window_after(10));
  e.kernels(100);  // dummy runs for the compile sizes
  EXPECT_FALSE(e.tracker.kv_window());
  for (int i = 0; i < 4; ++i) e.alloc(1 * GiB);  // activation buffers of one size
  e.query(4 * GiB);                              // a later query does not open it again
  for (int i = 0; i < 4; ++i) e.alloc(1 * GiB);
  EXPECT_FALSE(e.tracker.kv_window());
  EXPECT_EQ(e.tracker.kv_tensor_bytes(), 0u);
  EXPECT_EQ(e.tracker.current(), P::profiling) << "no KV burst was recognised";

  Engine burst;  // per-layer tensors right after the query: recognised as before
  vllm_until_sized(burst);
  burst.kernels(10);  // attention backends' set-up
  vllm_kv_and_capture(burst);
  EXPECT_EQ(burst.path(), (std::vector<Phase>{P::init, P::loading, P::profiling, P::kv_allocation, P::post_kv_warmup,
                                              P::capture, P::serving}));
}

}  // namespace

namespace {

// The interposer's lock-free path: allocations the tracker does not need one by one are summed and
// folded in before the next event. Fed that way, a vLLM and an SGLang start-up take exactly the
// same phase path as when every allocation is observed.
class SummingEngine {
 public:
  void feed(EventKind kind) {
    now_ += 1'000'000;
    if (const auto* a = std::get_if<Alloc>(&kind); a && !tracker.needs_each_allocation()) {
      pending_ += a->bytes;
      ++summed;
      return;
    }
    if (pending_) tracker.observe_allocated_bytes(pending_, now_ - 1);
    pending_ = 0;
    if (auto change = tracker.observe(Event{now_, 1, 0, std::move(kind)})) path.push_back(change->to);
  }
  PhaseTracker tracker;
  std::vector<Phase> path{Phase::init};
  int summed = 0;

 private:
  std::uint64_t now_ = 0;
  std::uint64_t pending_ = 0;
};

TEST(Phases, SummingAllocationsTheTrackerDoesNotNeedChangesNothing) {
  for (const bool sglang : {false, true}) {
    SCOPED_TRACE(sglang ? "sglang" : "vllm");
    Engine reference;
    if (sglang) {
      reference.query(79 * GiB);
      reference.load_weights();
      reference.query(50 * GiB);
      reference.query(50 * GiB);
      for (int layer = 0; layer < 48; ++layer) reference.zeros(900 * MiB);
      reference.alloc(64 * MiB);
      for (std::uint64_t c = 0; c < 10; ++c) reference.capture(c, 96 * MiB);
      reference.graph_launch();
    } else {
      vllm_until_sized(reference);
      vllm_kv_and_capture(reference);
    }
    SummingEngine summing;
    for (const EventKind& k : reference.fed) summing.feed(k);
    EXPECT_EQ(summing.path, reference.path());
    EXPECT_EQ(summing.tracker.kv_tensor_bytes(), reference.tracker.kv_tensor_bytes());
    EXPECT_GT(summing.summed, 100) << "weights and post-KV allocations took the lock-free path";
  }
}

}  // namespace
