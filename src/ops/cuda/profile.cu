// VerbProfiler (profile.h).
#include <algorithm>
#include <cstdio>
#include <cstdlib>

#include "ops/cuda/cuda_context.h"
#include "ops/cuda/profile.h"

namespace cera::ops::cuda {
namespace {

const char* verb_name(Verb v) {
  switch (v) {
    case Verb::kEmbed: return "embed";
    case Verb::kEmbedIds: return "embed_ids";
    case Verb::kMatmul: return "matmul";
    case Verb::kRmsNorm: return "rms_norm";
    case Verb::kRope: return "rope";
    case Verb::kGatedActivation: return "gated_activation";
    case Verb::kAddScaled: return "add_scaled";
    case Verb::kScale: return "scale";
    case Verb::kLayerNorm: return "layer_norm";
    case Verb::kActivation: return "activation";
    case Verb::kKvStore: return "kv_store";
    case Verb::kAttention: return "attention";
    case Verb::kTopK: return "top_k";
    case Verb::kShortConv: return "short_conv";
    case Verb::kMoeRoute: return "moe_route";
    case Verb::kMatmulExperts: return "matmul_experts";
    case Verb::kMoeCombine: return "moe_combine";
    case Verb::kMaskLogits: return "mask_logits";
    case Verb::kAllReduce: return "all_reduce";
    case Verb::kAllGatherCols: return "all_gather_cols";
    case Verb::kEmbedSlice: return "embed_slice";
  }
  return "?";
}

// verb, and for the matmuls the weight type and shape; token counts bucketed (1, 2-16, larger).
std::string key_of(const Call& c) {
  std::string k = verb_name(c.verb);
  const int64_t tokens = c.verb == Verb::kMatmul ? c.b.rows() : c.out.rows();
  if (c.verb == Verb::kMatmul) {
    k += std::string(" ") + std::string(dtype_name(c.a.dtype)) + " " + std::to_string(c.a.cols()) + "x" +
         std::to_string(c.a.rows());
  }
  if (c.verb == Verb::kAttention) k += " kv " + std::string(dtype_name(c.layer.k.dtype));
  k += tokens == 1 ? " [1 token]" : tokens <= 16 ? " [2-16 tokens]" : " [" + std::to_string(tokens) + " tokens]";
  return k;
}

}  // namespace

bool VerbProfiler::requested() {
  const char* e = std::getenv("CERA_CUDA_PROFILE");
  return e != nullptr && e[0] == '1';
}

void VerbProfiler::begin(const Call& call) {
  cudaEvent_t ev[2];
  for (cudaEvent_t& e : ev) {
    if (free_events_.empty()) {
      CERA_CUDA_CHECK(cudaEventCreate(&e));
    } else {
      e = free_events_.back();
      free_events_.pop_back();
    }
  }
  CERA_CUDA_CHECK(cudaEventRecord(ev[0], stream_));
  pending_.push_back({key_of(call), ev[0], ev[1]});
}

void VerbProfiler::end() {
  CERA_CUDA_CHECK(cudaEventRecord(pending_.back().stop, stream_));
  if (pending_.size() >= 4096) drain();
}

void VerbProfiler::drain() {
  for (Pending& p : pending_) {
    CERA_CUDA_CHECK(cudaEventSynchronize(p.stop));
    float ms = 0;
    CERA_CUDA_CHECK(cudaEventElapsedTime(&ms, p.start, p.stop));
    Total& t = totals_[p.key];
    t.ms += ms;
    ++t.calls;
    free_events_.push_back(p.start);
    free_events_.push_back(p.stop);
  }
  pending_.clear();
}

VerbProfiler::~VerbProfiler() {
  try {
    drain();
  } catch (const std::exception&) {  // destructors must not throw
  }
  std::vector<std::pair<std::string, Total>> rows(totals_.begin(), totals_.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  double all = 0;
  for (const auto& r : rows) all += r.second.ms;
  std::fprintf(stderr, "\ncuda verb profile (eager, device time)\n| verb | calls | total ms | us/call | share |\n"
                       "| --- | --- | --- | --- | --- |\n");
  for (const auto& [key, t] : rows) {
    std::fprintf(stderr, "| %s | %lld | %.3f | %.2f | %.1f %% |\n", key.c_str(), (long long)t.calls, t.ms,
                 1000.0 * t.ms / double(t.calls), 100.0 * t.ms / all);
  }
  for (cudaEvent_t e : free_events_) cudaEventDestroy(e);
}

}  // namespace cera::ops::cuda
