// Unit tests for policy/kv_recognition: placement and KV rules, replayed over vLLM-, SGLang- and tagged start-ups.
#include "policy/kv_recognition.h"

#include <gtest/gtest.h>

#include <vector>

using namespace kvremap::policy;

namespace {

constexpr std::uint64_t MiB = 1ull << 20;
constexpr std::uint64_t GiB = 1ull << 30;

// Builds one device's event sequence, 1 ms apart; remembers pointers by role.
class Startup {
 public:
  std::uint64_t alloc(std::uint64_t bytes) {
    next_ptr_ += bytes + 2 * MiB;
    push(Alloc{next_ptr_, bytes, Category::other, "cudaMalloc"});
    return next_ptr_;
  }
  void free_(std::uint64_t ptr, std::uint64_t bytes) { push(Free{ptr, bytes, Category::other}); }
  void query(std::uint64_t free_bytes) { push(MemoryQuery{free_bytes, 80 * GiB, free_bytes, 80 * GiB, std::nullopt}); }
  void kernels(int n) {
    for (int i = 0; i < n; ++i) push(KernelLaunch{});
  }
  std::uint64_t zeros(std::uint64_t bytes) {
    const std::uint64_t p = alloc(bytes);
    kernels(1);
    return p;
  }
  // A capture with graph-pool allocations inside it, then its instantiation.
  std::vector<std::uint64_t> capture(std::vector<std::uint64_t> pool_allocations) {
    const std::uint64_t id = ++captures_;
    push(CaptureBegin{id, CaptureMode::relaxed});
    std::vector<std::uint64_t> ptrs;
    for (std::uint64_t b : pool_allocations) ptrs.push_back(alloc(b));
    kernels(30);
    push(CaptureEnd{id, true});
    push(GraphInstantiate{8 * MiB});
    return ptrs;
  }
  void graph_launch() { push(GraphLaunch{}); }
  void module_load() { push(ModuleLoad{2 * MiB}); }

  // Weights as real models have them: per layer, identical expert tensors (far above 64 MiB).
  std::vector<std::uint64_t> weights(int layers, int experts, std::uint64_t expert_bytes) {
    std::vector<std::uint64_t> ptrs;
    for (int l = 0; l < layers; ++l) {
      ptrs.push_back(alloc(96 * MiB));  // attention projections
      for (int e = 0; e < experts; ++e) ptrs.push_back(alloc(expert_bytes));
    }
    return ptrs;
  }

  const std::vector<Event>& events() const { return events_; }

 private:
  void push(EventKind kind) { events_.push_back(Event{time_ns_ += 1'000'000, 1, 0, std::move(kind)}); }
  std::vector<Event> events_;
  std::uint64_t time_ns_ = 0;
  std::uint64_t next_ptr_ = 0x7f0000000000ull;
  std::uint64_t captures_ = 0;
};

bool contains(const std::vector<std::uint64_t>& v, std::uint64_t p) {
  for (std::uint64_t x : v)
    if (x == p) return true;
  return false;
}

// vLLM V1: baseline query, weights, "before profile" query, profile_run (activations and hundreds
// of kernels), the sizing query, then the KV tensors (torch.zeros each), the attention workspace and
// block tables in the KV window, then autotune and 67 captures with graph pools.
struct VllmRun {
  Startup s;
  std::vector<std::uint64_t> weights, activations, kv, graph_pool;
  std::uint64_t scheduler_buffer = 0, workspace = 0, block_table = 0, autotune = 0;
};

VllmRun vllm(bool graph_estimate) {
  VllmRun r;
  Startup& s = r.s;
  s.query(79 * GiB);
  r.weights = s.weights(8, 6, 640 * MiB);  // ~31 GiB of weights, 48 identical expert tensors
  s.query(47 * GiB);
  for (int i = 0; i < 4; ++i) {  // identical activations, each with its kernels
    r.activations.push_back(s.alloc(768 * MiB));
    s.kernels(10);
  }
  s.kernels(400);
  if (graph_estimate) {
    for (int c = 0; c < 3; ++c)
      for (std::uint64_t p : s.capture({256 * MiB, 256 * MiB, 256 * MiB})) r.graph_pool.push_back(p);
  }
  for (std::size_t i = 0; i < r.activations.size(); ++i) s.free_(r.activations[i], 768 * MiB);
  s.query(43 * GiB);  // the sizing query
  r.scheduler_buffer = s.alloc(128 * MiB);
  for (int layer = 0; layer < 48; ++layer) r.kv.push_back(s.zeros(400 * MiB));
  r.workspace = s.alloc(256 * MiB);
  r.block_table = s.alloc(8 * MiB);
  s.module_load();
  r.autotune = s.alloc(11 * GiB);
  s.kernels(200);
  s.free_(r.autotune, 11 * GiB);
  for (int c = 0; c < 67; ++c)
    for (std::uint64_t p : s.capture({34 * MiB})) r.graph_pool.push_back(p);
  s.query(10 * GiB);
  s.graph_launch();
  return r;
}

void expect_vllm_recognition(const VllmRun& r, const KvRecognition& got) {
  EXPECT_TRUE(got.burst_ended);
  EXPECT_EQ(got.tensor_bytes, 400 * MiB);
  EXPECT_EQ(got.kv, r.kv) << "exactly the KV tensors, in order";
  for (std::uint64_t p : r.weights) EXPECT_FALSE(contains(got.placed, p)) << "weights never go into the arena";
  for (std::uint64_t p : r.activations) EXPECT_FALSE(contains(got.placed, p)) << "profiling activations neither";
  for (std::uint64_t p : r.graph_pool) EXPECT_FALSE(contains(got.placed, p)) << "graph-pool memory neither";
  EXPECT_TRUE(contains(got.placed, r.scheduler_buffer)) << "a large buffer before the KV tensors is placed...";
  EXPECT_FALSE(contains(got.kv, r.scheduler_buffer)) << "...but is not KV: it stays backed";
  EXPECT_FALSE(contains(got.placed, r.workspace)) << "once the burst is recognised, other sizes stay out";
  EXPECT_FALSE(contains(got.placed, r.block_table)) << "below KVREMAP_KV_MIN_BYTES";
  EXPECT_FALSE(contains(got.placed, r.autotune)) << "after the burst ended nothing is placed";
}

TEST(KvRecognition, VllmStartupPlacesOnlyTheKvWindowAndFindsTheKvTensors) {
  const VllmRun r = vllm(false);
  expect_vllm_recognition(r, recognise_kv(r.s.events(), {}));
}

TEST(KvRecognition, VllmWithGraphMemoryEstimateDuringProfiling) {
  const VllmRun r = vllm(true);
  ASSERT_EQ(r.graph_pool.size(), 9u + 67u);
  expect_vllm_recognition(r, recognise_kv(r.s.events(), {}));
}

// SGLang: weights, a query when loading ends and one to size the pool, the KV pool (k and v buffer per layer), then
// capture.
TEST(KvRecognition, SglangStartupFindsThePoolWithoutProfiling) {
  Startup s;
  s.query(79 * GiB);
  const auto weights = s.weights(4, 8, 512 * MiB);
  s.query(60 * GiB);  // "Load weight end ... avail mem"
  s.query(60 * GiB);  // profile_max_num_token: the sizing query
  s.kernels(5);       // a few fill kernels, not a forward pass
  std::vector<std::uint64_t> kv;
  for (int layer = 0; layer < 32; ++layer) {
    kv.push_back(s.zeros(1200 * MiB));
    kv.push_back(s.zeros(1200 * MiB));
  }
  const std::uint64_t req_to_token = s.alloc(128 * MiB);
  std::vector<std::uint64_t> pools;
  for (int c = 0; c < 20; ++c)
    for (std::uint64_t p : s.capture({96 * MiB})) pools.push_back(p);
  s.graph_launch();
  const KvRecognition got = recognise_kv(s.events(), {});
  EXPECT_TRUE(got.burst_ended);
  EXPECT_EQ(got.kv, kv);
  EXPECT_EQ(got.tensor_bytes, 1200 * MiB);
  for (std::uint64_t p : weights) EXPECT_FALSE(contains(got.placed, p));
  for (std::uint64_t p : pools) EXPECT_FALSE(contains(got.placed, p));
  EXPECT_FALSE(contains(got.placed, req_to_token)) << "after the recognised burst: ordinary memory";
}

// An engine whose sizing query is followed by only two KV tensors, each too small a share of the free
// memory to be a whole KV cache: recognition needs three, so nothing is KV — unless
// KVREMAP_KV_TENSOR_BYTES names the size.
TEST(KvRecognition, TensorSizeOverrideCoversBurstsRecognitionMisses) {
  Startup s;
  s.query(79 * GiB);
  s.weights(2, 2, 1 * GiB);
  s.query(70 * GiB);
  s.query(70 * GiB);
  const std::uint64_t k = s.zeros(12 * GiB);
  const std::uint64_t v = s.zeros(12 * GiB);
  s.alloc(16 * MiB);
  s.capture({64 * MiB});
  s.graph_launch();

  const KvRecognition plain = recognise_kv(s.events(), {});
  EXPECT_FALSE(plain.burst_ended);
  EXPECT_TRUE(plain.kv.empty());
  EXPECT_EQ(plain.placed, (std::vector<std::uint64_t>{k, v})) << "placed, but stays backed as ordinary memory";

  RecognitionConfig c;
  c.tensor_override = 12 * GiB;
  const KvRecognition forced = recognise_kv(s.events(), c);
  EXPECT_TRUE(forced.burst_ended);
  EXPECT_EQ(forced.kv, (std::vector<std::uint64_t>{k, v}));
  EXPECT_EQ(forced.tensor_bytes, 12 * GiB);
}

TEST(KvRecognition, KvMinBytesIsTheEnvOverrideOfWhatIsACandidate) {
  const VllmRun r = vllm(false);
  RecognitionConfig c;
  c.min_bytes = 512 * MiB;  // above the 400 MiB KV tensors: nothing of the burst is placed
  const KvRecognition got = recognise_kv(r.s.events(), c);
  EXPECT_TRUE(got.placed.empty());
  EXPECT_TRUE(got.kv.empty());
}

TEST(KvRecognition, PlacementRules) {
  PlacementQuery q;
  q.bytes = 128 * MiB;
  q.min_bytes = 64 * MiB;
  EXPECT_FALSE(place_in_arena(q)) << "outside the KV window";
  q.kv_window = true;
  EXPECT_TRUE(place_in_arena(q));
  q.recognised_bytes = 400 * MiB;
  EXPECT_FALSE(place_in_arena(q)) << "the burst is known to be 400 MiB tensors";
  q.bytes = 400 * MiB;
  EXPECT_TRUE(place_in_arena(q));
  q.bytes = 128 * MiB;
  q.recognised_bytes = 0;
  q.capture_open = true;
  EXPECT_FALSE(place_in_arena(q)) << "graph-pool memory never";
  q.capture_open = false;
  q.burst_over = true;
  EXPECT_FALSE(place_in_arena(q)) << "not after the burst";
  q.burst_over = false;
  q.bytes = 32 * MiB;
  EXPECT_FALSE(place_in_arena(q)) << "below KVREMAP_KV_MIN_BYTES";

  PlacementQuery tagged;
  tagged.bytes = 4096;
  tagged.tag = KvTag::kv;
  tagged.min_bytes = 64 * MiB;
  EXPECT_TRUE(place_in_arena(tagged)) << "a kv tag places any size, in any phase";
  tagged.capture_open = true;
  EXPECT_FALSE(place_in_arena(tagged)) << "but never during capture";
  PlacementQuery none = q;
  none.bytes = 1 * GiB;
  none.tag = KvTag::not_kv;
  EXPECT_FALSE(place_in_arena(none)) << "a none tag keeps a large buffer out of the window";
  EXPECT_FALSE(may_place_in_arena(1 * GiB, KvTag::not_kv, 64 * MiB));
  EXPECT_TRUE(may_place_in_arena(4096, KvTag::kv, 64 * MiB));
  EXPECT_FALSE(may_place_in_arena(4096, KvTag::untagged, 64 * MiB));
}

TEST(KvRecognition, KvRegionsAndBurstEnd) {
  EXPECT_TRUE(is_kv({400 * MiB, false}, 400 * MiB));
  EXPECT_FALSE(is_kv({256 * MiB, false}, 400 * MiB));
  EXPECT_FALSE(is_kv({400 * MiB, false}, 0)) << "nothing recognised: nothing untagged is KV";
  EXPECT_TRUE(is_kv({4096, true}, 0));
  EXPECT_EQ(kv_tensor_size(400 * MiB, 0), 400 * MiB);
  EXPECT_EQ(kv_tensor_size(400 * MiB, 1 * GiB), 1 * GiB);

  BurstEndQuery q;
  q.have_placements = true;
  q.burst_recognised = true;
  EXPECT_TRUE(kv_burst_over(q));
  q.launch = true;
  EXPECT_FALSE(kv_burst_over(q)) << "fill kernels run inside the burst";
  q.launch = false;
  q.have_placements = false;
  EXPECT_FALSE(kv_burst_over(q)) << "nothing to defer";
  q.have_placements = true;
  q.burst_recognised = false;
  EXPECT_FALSE(kv_burst_over(q)) << "not recognised yet";
  q.any_tagged = true;
  EXPECT_TRUE(kv_burst_over(q)) << "a tagged burst needs no recognition";
  q.kv_tag_open = true;
  EXPECT_FALSE(kv_burst_over(q)) << "but ends only once its tag is closed";
  BurstEndQuery forced;
  forced.have_placements = true;
  forced.tensor_bytes = 1 * GiB;
  EXPECT_FALSE(kv_burst_over(forced)) << "override named, no placement of that size yet";
  forced.placement_of_tensor_size = true;
  EXPECT_TRUE(kv_burst_over(forced));
}

}  // namespace

namespace {

// An engine that never queries a second time after its weights: nothing is recognised, but naming
// the KV tensor size places and defers exactly those tensors.
// KVREMAP_KV_TENSOR_BYTES names a size, not a phase: outside the KV window (here a query after an
// unannounced forward pass, which does not open it) nothing of that size is placed, so a wrong guess
// can never defer a weight or a workspace that kernels wrote.
TEST(KvRecognition, TensorSizeOverrideNeverPlacesOutsideTheWindow) {
  Startup s;
  s.query(79 * GiB);
  s.weights(2, 2, 1 * GiB);
  s.kernels(500);  // an unannounced forward pass
  s.query(40 * GiB);
  for (int i = 0; i < 8; ++i) s.zeros(2 * GiB);
  s.alloc(16 * MiB);
  s.capture({64 * MiB});
  EXPECT_TRUE(recognise_kv(s.events(), {}).placed.empty());
  RecognitionConfig c;
  c.tensor_override = 2 * GiB;
  const KvRecognition got = recognise_kv(s.events(), c);
  EXPECT_TRUE(got.placed.empty());
  EXPECT_TRUE(got.kv.empty());
  EXPECT_FALSE(got.burst_ended);
}

// A loading-phase allocation of exactly the named size (a 1 GiB weight) stays ordinary memory; the
// KV burst of that size after the sizing query is placed and is the KV cache.
TEST(KvRecognition, TensorSizeOverrideLeavesLoadingAllocationsOfThatSizeAlone) {
  Startup s;
  s.query(79 * GiB);
  const std::uint64_t weight = s.alloc(1 * GiB);
  s.weights(2, 2, 512 * MiB);
  s.query(70 * GiB);
  s.query(70 * GiB);
  const std::uint64_t k = s.zeros(1 * GiB);
  const std::uint64_t v = s.zeros(1 * GiB);
  s.alloc(16 * MiB);
  s.capture({64 * MiB});
  RecognitionConfig c;
  c.tensor_override = 1 * GiB;
  const KvRecognition got = recognise_kv(s.events(), c);
  EXPECT_EQ(got.placed, (std::vector<std::uint64_t>{k, v})) << "the weight " << weight << " is not placed";
  EXPECT_EQ(got.kv, (std::vector<std::uint64_t>{k, v}));

  PlacementQuery q;
  q.bytes = 1 * GiB;
  q.min_bytes = 64 * MiB;
  q.tensor_override = 1 * GiB;
  EXPECT_FALSE(place_in_arena(q)) << "outside the KV window, whatever the override";
  q.kv_window = true;
  EXPECT_TRUE(place_in_arena(q));
}

}  // namespace
