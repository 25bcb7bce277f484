// vllm_like serving after start-up: eager prefills, decode steps (graph replays or eager), KV write and read-back.
//
// Every step writes a pattern into one KV region and then checks every region whose content is
// known, so a KV write made early in serving must survive everything after it: a commit that
// zero-fills after serving began, or serving from an aliased scratch, fails the check (exit 1).
#include <algorithm>
#include <cstdio>

#include "cuda_check.h"
#include "engine.h"
#include "kv_sample.h"
#include "serving_marker.h"

namespace vllm_like {

namespace {

constexpr std::uint32_t kFirstRequestSeed = 0xf1257000u;
constexpr std::uint32_t kSecondRequestSeed = 0x5ec0d000u;
constexpr std::uint32_t kEagerDecodeSeed = 0xdec00000u;
constexpr std::uint32_t kReqToTokenSeed = 0x7e90c000u;

const char* region_name(std::size_t region) {
  switch (region) {
    case kFirstPromptRegion:
      return "first prompt";
    case kDecodeRegion:
      return "decode";
    case kSecondPromptRegion:
      return "second prompt";
    default:
      return "untouched";
  }
}

}  // namespace

void Engine::write_kv_region(const Tensor& kv, KvRegion region, std::uint32_t seed) {
  const std::uint64_t bytes = kv.bytes / kKvRegionCount;
  kernels_->fill(static_cast<std::uint8_t*>(kv.ptr) + region * bytes, bytes, seed);
}

void Engine::check_kv_region(const Tensor& kv, KvRegion region, std::uint32_t seed) {
  const std::uint64_t bytes = kv.bytes / kKvRegionCount;
  kernels_->check(static_cast<const std::uint8_t*>(kv.ptr) + region * bytes, bytes, seed);
}

void Engine::verify_kv(const std::string& when) {
  std::uint64_t words = 0;
  std::string regions;
  for (std::size_t r = 0; r < kKvRegionCount; ++r) {
    if (!kv_expected_[r]) continue;
    for (const Tensor& kv : kv_) {
      check_kv_region(kv, static_cast<KvRegion>(r), *kv_expected_[r]);
      words += sample_count(kv.bytes / kKvRegionCount, kSampleStride);
    }
    regions += std::string(regions.empty() ? "" : ", ") + region_name(r);
  }
  for (const Tensor& t : persistent_) {
    kernels_->check(t.ptr, t.bytes, 0);  // never written after torch.zeros
    words += sample_count(t.bytes, kSampleStride);
  }
  const std::uint32_t bad = kernels_->take_mismatches();
  if (bad != 0)
    throw EngineExit(kExitFailure, "KV verification failed " + when + ": " + std::to_string(bad) + " of " +
                                       std::to_string(words) + " sampled words differ (regions checked: " + regions +
                                       ")");
}

void Engine::verify_prefix(KvRegion region, std::uint32_t seed, const std::string& when) {
  std::uint64_t words = 0;
  for (const Tensor& kv : kv_) {
    check_kv_region(kv, region, seed);
    words += sample_count(kv.bytes / kKvRegionCount, kSampleStride);
  }
  const std::uint32_t bad = kernels_->take_mismatches();
  if (bad != 0)
    throw EngineExit(kExitFailure, "KV verification failed " + when + ": " + std::to_string(bad) + " of " +
                                       std::to_string(words) + " sampled prefix words differ");
}

// Serving runs on the main stream (vLLM) or the forward stream (SGLang). What start-up wrote into the decode region is not known (a
// deferred KV cache kept it in scratch and zeroed it on commit); every other region still holds
// torch.zeros and is checked as such until serving writes it.
void Engine::begin_serving() {
  begin_phase("serving");
  use_stream(forward_stream_ != nullptr ? forward_stream_ : main_stream_);
  kv_expected_.fill(0u);
  kv_expected_[kDecodeRegion].reset();
  if (mark_serving_start()) std::printf("vllm_like: phase serving: simcudart_mark_serving() called\n");
}

// A prefill too long for any captured graph: eager, on the serving stream, at `peak` (the scenario's serving
// activation peak, or for the first prompt its first-prompt peak), writing the prompt's KV.
void Engine::eager_prefill(const char* request, std::size_t tokens, KvRegion region, std::uint32_t seed,
                           std::uint64_t peak) {
  eager_forward(KvWrite{region, seed}, peak);
  kv_expected_[region] = seed;
  verify_kv(std::string("after the ") + request + "'s eager prefill");
  std::printf("vllm_like: phase serving: %s: eager prefill of %zu tokens on the serving stream, KV verified\n", request,
              tokens);
}

// One decode step: a replay of a captured graph (spread over the sizes, on the serving stream), or an
// eager forward where there are no graphs.
void Engine::decode_step(std::size_t step, std::size_t of_steps) {
  if (graphs_.empty()) {
    const std::uint32_t seed = kEagerDecodeSeed | static_cast<std::uint32_t>(step & 0xffffu);
    eager_forward(KvWrite{kDecodeRegion, seed});
    kv_expected_[kDecodeRegion] = seed;
    verify_kv("after an eager decode step");
    std::printf("vllm_like: phase serving: step %zu ran an eager decode, KV verified\n", step);
    return;
  }
  const std::size_t n = graphs_.size();
  const CapturedGraph& g = graphs_[of_steps > 1 ? (n - 1) * step / (of_steps - 1) : 0];
  VLLM_LIKE_CHECK(cudaGraphLaunch(g.exec, current_stream_));
  kv_expected_[kDecodeRegion] = graph_seed(g.batch);
  verify_kv("after a graph replay");
  std::printf("vllm_like: phase serving: step %zu replayed the batch-%zu graph, KV verified\n", step, g.batch);
}

// vLLM: by default the first steps are graph replays; with --first-request eager-prefill (and
// always with --enforce-eager) a prompt longer than the largest captured size is prefilled eagerly
// first. Then decode steps, and a later request's eager prefill at the activation peak.
void Engine::serve_vllm() {
  begin_serving();
  const std::size_t largest =
      s_.capture_sizes.empty() ? 0 : *std::max_element(s_.capture_sizes.begin(), s_.capture_sizes.end());
  if (!o_.cuda_graphs || o_.first_request == FirstRequest::eager_prefill)
    eager_prefill("first request", largest + 1, kFirstPromptRegion, kFirstRequestSeed,
                  s_.first_prompt_activation_peak);
  for (std::size_t step = 0; step < s_.serving_steps; ++step) decode_step(step, s_.serving_steps);
  eager_forward(KvWrite{kSecondPromptRegion, kSecondRequestSeed}, s_.serving_activation_peak);
  kv_expected_[kSecondPromptRegion] = kSecondRequestSeed;
  verify_kv("after an eager step");
  std::printf("vllm_like: phase serving: eager step at the serving activation peak, KV verified, free %s GiB\n",
              gib(static_cast<double>(query_free())).c_str());
}

// SGLang: the server's own warm-up request right after start-up (eager prefill, decode steps), then
// a request whose prompt extends the warm-up prompt: the prefix cache serves the shared prefix from
// the KV the warm-up request wrote, which is read back and checked, then its own tokens are
// prefilled and decoded.
void Engine::serve_sglang() {
  begin_serving();
  const std::size_t largest =
      s_.capture_sizes.empty() ? 0 : *std::max_element(s_.capture_sizes.begin(), s_.capture_sizes.end());
  // The scheduler admits the warm-up request into req_to_token row 1 (row 0 is the padding slot,
  // memory_pool.py:268): its token slots, read back at the end of serving.
  const std::uint64_t row = (o_.context_length + 4) * sizeof(std::int32_t);
  std::uint8_t* const first_row = static_cast<std::uint8_t*>(req_to_token_.ptr) + row;
  kernels_->fill(first_row, row, kReqToTokenSeed);
  eager_prefill("warm-up request", largest + 1, kFirstPromptRegion, kFirstRequestSeed,
                s_.first_prompt_activation_peak);
  for (std::size_t step = 0; step < s_.serving_steps; ++step) decode_step(step, s_.serving_steps);
  verify_prefix(kFirstPromptRegion, kFirstRequestSeed, "reading the warm-up request's prefix back");
  std::printf("vllm_like: phase serving: second request: prefix cache hit, the warm-up request's KV read back\n");
  eager_prefill("second request", largest + 1, kSecondPromptRegion, kSecondRequestSeed, s_.serving_activation_peak);
  for (std::size_t step = 0; step < s_.serving_steps; ++step) decode_step(step, s_.serving_steps);
  verify_kv("at the end of serving");
  kernels_->check(first_row, row, kReqToTokenSeed);
  kernels_->check(req_to_token_.ptr, row, 0);  // the padding row: still torch.zeros
  if (const std::uint32_t bad = kernels_->take_mismatches(); bad != 0)
    throw EngineExit(kExitFailure, "req_to_token verification failed at the end of serving: " + std::to_string(bad) +
                                       " sampled words differ");
  std::printf("vllm_like: phase serving: both requests served, KV and req_to_token verified, free %s GiB\n",
              gib(static_cast<double>(query_free())).c_str());
}

}  // namespace vllm_like
