#include "runtime/sampler.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "core/check.h"
#include "ops/backend.h"

namespace cera::runtime {

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(params.seed) {}

double Sampler::uniform() { return static_cast<double>(rng_() >> 11) * 0x1.0p-53; }

bool Sampler::penalties_active() const {
  const bool any = params_.repeat_penalty != 1.0f || params_.frequency_penalty != 0.0f ||
                   params_.presence_penalty != 0.0f;
  return any && params_.penalty_last_n != 0;
}

void Sampler::apply_penalties(std::span<const int32_t> history) {
  if (!penalties_active() || history.empty()) return;
  size_t n = history.size();
  if (params_.penalty_last_n > 0) n = std::min(n, static_cast<size_t>(params_.penalty_last_n));
  std::unordered_map<int32_t, int32_t> counts;
  for (int32_t t : history.subspan(history.size() - n)) ++counts[t];
  for (const auto& [id, count] : counts) {
    if (id < 0 || id >= static_cast<int32_t>(work_.size())) continue;
    float& l = work_[id];
    l = l > 0 ? l / params_.repeat_penalty : l * params_.repeat_penalty;
    l -= static_cast<float>(count) * params_.frequency_penalty + params_.presence_penalty;
  }
}

namespace {
// p at `temperature` over the candidates, normalised over them (they are all that is left).
template <typename C>
void softmax(std::vector<C>& cand, float temperature) {
  const float max_l = cand.front().logit;
  double sum = 0;
  for (C& c : cand) sum += (c.p = std::exp((c.logit - max_l) / temperature));
  for (C& c : cand) c.p = static_cast<float>(c.p / sum);
}
}  // namespace

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  CERA_CHECK(!logits.empty());
  work_.assign(logits.begin(), logits.end());
  apply_penalties(history);
  const int32_t n_vocab = static_cast<int32_t>(work_.size());
  if (params_.temperature <= 0.0f) {
    return static_cast<int32_t>(std::max_element(work_.begin(), work_.end()) - work_.begin());
  }
  // top-k: partial sort keeps it O(n log k) for the usual k = 40.
  const int32_t k = params_.top_k > 0 ? std::min(params_.top_k, n_vocab) : n_vocab;
  cand_.resize(n_vocab);
  for (int32_t i = 0; i < n_vocab; ++i) cand_[i] = {i, work_[i], 0.0f};
  auto by_logit = [](const Candidate& a, const Candidate& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  std::partial_sort(cand_.begin(), cand_.begin() + k, cand_.end(), by_logit);
  cand_.resize(k);
  // Probabilities at temperature 1 decide top-p and min-p (the order llama.cpp uses).
  softmax(cand_, 1.0f);
  return *cut_and_draw(true);
}

int32_t Sampler::candidates_needed(int32_t n_vocab) const {
  if (penalties_active()) return 0;
  if (params_.temperature <= 0.0f) return 1;
  const int32_t cap = std::min(ops::TopKParams::kMaxTopK, n_vocab);
  if (params_.top_k > 0) return std::min(params_.top_k, n_vocab) <= cap ? std::min(params_.top_k, n_vocab) : 0;
  return params_.top_p < 1.0f || params_.min_p > 0.0f ? cap : 0;
}

std::optional<int32_t> Sampler::sample_candidates(std::span<const int32_t> ids, std::span<const float> values,
                                                  float lse) {
  CERA_CHECK(!ids.empty() && ids.size() == values.size());
  if (params_.temperature <= 0.0f) return ids[0];
  cand_.resize(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) cand_[i] = {ids[i], values[i], 0.0f};
  if (params_.top_k > 0) {
    // The candidates are exactly the top-k set: normalised over them, as sample() does.
    softmax(cand_, 1.0f);
    return cut_and_draw(true);
  }
  // No top-k cut: probabilities over the whole vocabulary, from its log-sum-exp.
  for (Candidate& c : cand_) c.p = std::exp(c.logit - lse);
  return cut_and_draw(false);
}

std::optional<int32_t> Sampler::cut_and_draw(bool complete) {
  if (params_.top_p < 1.0f) {
    double cum = 0;
    size_t keep = 0;
    for (size_t i = 0; i < cand_.size() && keep == 0; ++i) {
      cum += cand_[i].p;
      if (cum >= params_.top_p) keep = i + 1;
    }
    if (keep == 0 && !complete) return std::nullopt;  // the nucleus reaches past the candidates
    if (keep != 0) {
      cand_.resize(keep);
      complete = true;
    }
  }
  if (params_.min_p > 0.0f) {
    const float threshold = cand_.front().p * params_.min_p;
    size_t keep = 1;
    while (keep < cand_.size() && cand_[keep].p >= threshold) ++keep;
    if (keep == cand_.size() && !complete) return std::nullopt;  // more tokens may pass the bar
    cand_.resize(keep);
    complete = true;
  }
  if (!complete) return std::nullopt;
  softmax(cand_, params_.temperature);
  double r = uniform();
  for (const Candidate& c : cand_) {
    r -= c.p;
    if (r < 0) return c.id;
  }
  // Rounding left r a hair above zero: the last token that has any probability (a masked one,
  // at -inf, has none).
  for (auto it = cand_.rbegin(); it != cand_.rend(); ++it) {
    if (it->p > 0) return it->id;
  }
  return cand_.front().id;
}

}  // namespace cera::runtime
