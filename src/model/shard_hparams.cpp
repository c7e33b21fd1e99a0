#include "model/shard_hparams.h"

#include <string>

namespace cera::model {
namespace {

std::string divisors(int32_t count, int max_ranks) {
  std::string out;
  for (int n = 1; n <= max_ranks; ++n) {
    if (count % n == 0) out += (out.empty() ? "" : ", ") + std::to_string(n);
  }
  return out;
}

// count / n_ranks, or an error naming `key`.
Status divide(const HParams& hp, const char* key, int32_t& count, const ShardSpec& spec) {
  if (count % spec.n_ranks != 0) {
    return invalid_argument(
        std::string(arch_name(hp.arch)) + "." + key + " is " + std::to_string(count) +
        ", which does not divide among " + std::to_string(spec.n_ranks) +
        " tensor-parallel ranks; rank counts that divide it, up to 8: " + divisors(count, 8));
  }
  count /= spec.n_ranks;
  return ok_status();
}

}  // namespace

Result<HParams> shard_hparams(const HParams& whole, const ShardSpec& spec) {
  CERA_RETURN_IF_ERROR(check_shard_spec(spec));
  if (!spec.split()) return whole;
  if (whole.arch == Arch::kBert) {
    return unsupported(
        "tensor parallelism is for decoder models; bert (an encoder) runs on one device");
  }
  HParams hp = whole;
  // KV-head groups: a rank's query heads are the ones that read its KV heads, so both divide.
  CERA_RETURN_IF_ERROR(divide(hp, "attention.head_count_kv", hp.n_head_kv, spec));
  CERA_RETURN_IF_ERROR(divide(hp, "attention.head_count", hp.n_head, spec));
  for (int32_t& n : hp.n_head_kv_layer) {
    CERA_RETURN_IF_ERROR(
        divide(hp, "attention.head_count_kv", n, spec));  // 0 (convolution) divides
  }
  if (hp.n_ff > 0) CERA_RETURN_IF_ERROR(divide(hp, "feed_forward_length", hp.n_ff, spec));
  if (hp.n_expert > 0)
    CERA_RETURN_IF_ERROR(divide(hp, "expert_feed_forward_length", hp.n_ff_exp, spec));
  return hp;
}

}  // namespace cera::model
