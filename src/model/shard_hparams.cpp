#include "model/shard_hparams.h"

#include <string>

namespace cera::model {
namespace {

std::string key(const HParams& hp, const char* name) {
  return std::string(arch_name(hp.arch)) + "." + name;
}

// The rank's share of `count` units dealt out balanced (shard.h), or an error naming `name` when
// there are fewer units than ranks.
Status balanced(const HParams& hp, const char* name, int32_t& count, const ShardSpec& spec) {
  if (count < spec.n_ranks) {
    return invalid_argument(key(hp, name) + " is " + std::to_string(count) + ", fewer than the " +
                            std::to_string(spec.n_ranks) + " tensor-parallel ranks; use at most " +
                            std::to_string(count) + " ranks");
  }
  count = static_cast<int32_t>(balanced_range(count, spec).count);
  return ok_status();
}

// A rank's query and KV heads (head_split): whole KV-head groups, dealt out balanced, when there
// are at least as many KV heads as ranks; else one replicated KV head and n_head / n_ranks query
// heads, which needs n_ranks to be a multiple of the KV heads and to divide the query heads.
Status rank_heads(const HParams& hp, int32_t& n_head, int32_t& n_head_kv, const ShardSpec& spec) {
  if (n_head_kv >= spec.n_ranks) {
    const int32_t group = n_head / n_head_kv;
    CERA_RETURN_IF_ERROR(balanced(hp, "attention.head_count_kv", n_head_kv, spec));
    n_head = n_head_kv * group;
    return ok_status();
  }
  if (spec.n_ranks % n_head_kv != 0 || n_head % spec.n_ranks != 0) {
    std::string fits;  // rank counts that work: up to n_head_kv, or multiples of it dividing n_head
    for (int n = 1; n <= 8; ++n) {
      if (n <= n_head_kv || (n % n_head_kv == 0 && n_head % n == 0))
        fits += (fits.empty() ? "" : ", ") + std::to_string(n);
    }
    return invalid_argument(
        key(hp, "attention.head_count_kv") + " is " + std::to_string(n_head_kv) + " (" +
        key(hp, "attention.head_count") + " " + std::to_string(n_head) +
        "): " + std::to_string(spec.n_ranks) +
        " tensor-parallel ranks would need the KV heads replicated, which takes a rank count "
        "that is a multiple of the KV heads and divides the query heads; rank counts that fit, up "
        "to 8: " +
        fits);
  }
  n_head_kv = 1;
  n_head /= spec.n_ranks;
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
  // n_head_kv 0: no attention layer at all (a convolution-only lfm2), so no heads to deal.
  if (hp.n_head_kv > 0) CERA_RETURN_IF_ERROR(rank_heads(hp, hp.n_head, hp.n_head_kv, spec));
  for (int32_t& n : hp.n_head_kv_layer) {
    int32_t n_head = whole.n_head;
    if (n != 0) CERA_RETURN_IF_ERROR(rank_heads(hp, n_head, n, spec));  // 0: a convolution layer
  }
  if (hp.n_ff > 0) CERA_RETURN_IF_ERROR(balanced(hp, "feed_forward_length", hp.n_ff, spec));
  if (hp.n_expert > 0)
    CERA_RETURN_IF_ERROR(balanced(hp, "expert_feed_forward_length", hp.n_ff_exp, spec));
  return hp;
}

}  // namespace cera::model
