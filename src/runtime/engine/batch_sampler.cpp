// A row with a logit bias samples from its candidates when that is exact: the chain must be
// greedy or have a top-k cut (a bias changes the row's log-sum-exp, which top-p / min-p without a
// top-k cut would need), and the row asks for need + n_bias candidates. Every token outside the
// candidates is unbiased (biased tokens are gathered), so it ranks after the last candidate
// (value desc, id asc); the biased list's prefix ranking at or before that candidate is exactly
// the biased row's top, and with at most n_bias candidates pushed down it holds `need` tokens.
#include "runtime/engine/batch_sampler.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace cera::runtime {
namespace {

// As Backend::top_k (ops/top_k.cpp) and model::apply_logit_softcap compute it, so that a raw
// logit read here equals the candidate value top_k returns for it.
// A masked logit (-inf: Backend::mask_logits) stays -inf.
float softcapped(float x, float cap) { return cap > 0.0f && !(std::isinf(x) && x < 0) ? cap * std::tanh(x / cap) : x; }

constexpr int32_t kMaxTopK = ops::TopKParams::kMaxTopK;

}  // namespace

struct BatchSampler::Plan {
  int32_t need = 0;    // Sampler::candidates_needed: 0 = the chain needs the whole row
  int32_t cand_k = 0;  // candidates to sample from (need + n_bias with a bias); 0: the whole row
  int32_t k_row = 0;   // candidates this row reads: the larger of cand_k and what logprobs need
  size_t missing = 0;  // first of its biased tokens outside the candidates in flat_ / gathered_
  float chosen_raw = 0.0f;
  bool chosen_known = false;
};

Result<BatchSampler> BatchSampler::create(ops::Backend& backend, int32_t n_vocab, int32_t max_rows) {
  if (n_vocab <= 0 || max_rows <= 0) return invalid_argument("batch sampler: n_vocab and max_rows must be > 0");
  if (int64_t{n_vocab} * max_rows > INT32_MAX) {
    return out_of_range("batch sampler: " + std::to_string(max_rows) + " rows of " + std::to_string(n_vocab) +
                        " logits exceed 32-bit indices");
  }
  BatchSampler s(backend, n_vocab, max_rows);
  CERA_ASSIGN_OR_RETURN(s.pick_buffer_, backend.allocate(static_cast<uint64_t>(max_rows) * (2 * kMaxTopK + 1) * 4));
  CERA_ASSIGN_OR_RETURN(s.gather_buffer_, backend.allocate(static_cast<uint64_t>(max_rows) * kMaxTopK * 4));
  CERA_ASSIGN_OR_RETURN(s.argmax_buffer_, backend.allocate(static_cast<uint64_t>(max_rows) * 3 * 4 * 2));
  for (ArgmaxSlot& slot : s.argmax_) slot.host.resize(static_cast<size_t>(max_rows));
  return s;
}

void BatchSampler::gather(const TensorView& logits, float softcap, std::span<const int32_t> flat,
                          std::vector<float>& out) {
  out.resize(flat.size());
  if (flat.empty()) return;
  const Device dev = backend_->device();
  CERA_CHECK(flat.size() <= static_cast<size_t>(max_rows_) * kMaxTopK);
  // Backend::embed gathers table rows by id: the logits seen as a table of one-float rows.
  const TensorView table = logits.reshaped({1, logits.n_elements(), 1, 1});
  const TensorView dst = gather_buffer_->view(DType::kF32, {1, static_cast<int64_t>(flat.size()), 1, 1}, dev);
  backend_->embed(dst, table, flat, 1.0f);
  backend_->download(out.data(), dst);
  for (float& x : out) x = softcapped(x, softcap);
  ++stats_.n_gathers;
}

void BatchSampler::read_row(const TensorView& logits, float softcap, int64_t r) {
  row_.resize(static_cast<size_t>(n_vocab_));
  backend_->download(row_.data(), logits.slice_rows(r, 1));
  for (float& x : row_) x = softcapped(x, softcap);
  ++stats_.n_rows_read_back;
}

TensorView BatchSampler::queue_argmax(const TensorView& logits, float softcap, int slot) {
  const int64_t n = logits.rows();
  CERA_CHECK_MSG(slot >= 0 && slot < 2 && n > 0 && n <= max_rows_ && logits.dtype == DType::kF32 &&
                     logits.cols() == n_vocab_ && logits.packed(),
                 "batch sampler: argmax of packed F32 [n_vocab, n_rows] logits, n_rows <= max_rows, slot 0 or 1");
  ArgmaxSlot& s = argmax_[slot];
  CERA_CHECK_MSG(!s.in_flight, "batch sampler: argmax slot " + std::to_string(slot) + " is still being read back");
  const Device dev = backend_->device();
  std::byte* base = argmax_buffer_->data() + static_cast<size_t>(slot) * max_rows_ * 3 * 4;
  const TensorView ids = make_view(base, DType::kI32, {1, n, 1, 1}, dev);
  const TensorView values = make_view(base + 4 * max_rows_, DType::kF32, {1, n, 1, 1}, dev);
  const TensorView lse = make_view(base + 8 * max_rows_, DType::kF32, {1, n, 1, 1}, dev);
  backend_->top_k(ids, values, lse, logits, {.k = 1, .softcap = softcap});
  s.n_rows = n;
  s.in_flight = backend_->download_async(s.host.data(), ids);
  ++stats_.n_top_k_calls;
  return ids.reshaped({n, 1, 1, 1});
}

std::span<const int32_t> BatchSampler::wait_argmax(int slot) {
  CERA_CHECK(slot >= 0 && slot < 2);
  ArgmaxSlot& s = argmax_[slot];
  CERA_CHECK_MSG(s.in_flight.has_value(), "batch sampler: argmax slot " + std::to_string(slot) + " was not queued");
  backend_->wait(*s.in_flight);
  s.in_flight.reset();
  return std::span<const int32_t>(s.host.data(), static_cast<size_t>(s.n_rows));
}

void BatchSampler::sample(const TensorView& logits, float softcap, std::span<const SampleRow> rows,
                          std::vector<SampledToken>& out) {
  const auto n = static_cast<int64_t>(rows.size());
  out.assign(rows.size(), {});
  if (n == 0) return;
  CERA_CHECK_MSG(n <= max_rows_ && logits.dtype == DType::kF32 && logits.cols() == n_vocab_ && logits.rows() == n &&
                     logits.packed(),
                 "batch sampler: logits must be packed F32 [n_vocab, n_rows] with n_rows <= max_rows");
  // Grammar masks first: every stage below reads the masked logits.
  const size_t n_words = static_cast<size_t>((n_vocab_ + 31) / 32);
  masks_.clear();
  mask_rows_.clear();
  for (int64_t r = 0; r < n; ++r) {
    if (rows[r].allowed.empty()) continue;
    CERA_CHECK_MSG(rows[r].allowed.size() == n_words, "batch sampler: a mask of ceil(n_vocab / 32) words");
    masks_.insert(masks_.end(), rows[r].allowed.begin(), rows[r].allowed.end());
    mask_rows_.push_back(static_cast<int32_t>(r));
  }
  if (!mask_rows_.empty()) backend_->mask_logits(logits, masks_, mask_rows_);
  const int32_t cap = std::min(kMaxTopK, n_vocab_);
  std::vector<Plan> plans(rows.size());
  int32_t k = 0;  // the step's: the largest any row asks for
  for (int64_t r = 0; r < n; ++r) {
    const SampleRow& row = rows[r];
    Plan& p = plans[r];
    const size_t n_bias = row.logit_bias != nullptr ? row.logit_bias->size() : 0;
    p.need = row.sampler->candidates_needed(n_vocab_);
    const SamplingParams& sp = row.sampler->params();
    if (p.need > 0 && (n_bias == 0 || sp.temperature <= 0.0f || sp.top_k > 0)) {
      const int64_t want = std::min<int64_t>(int64_t{p.need} + static_cast<int64_t>(n_bias), n_vocab_);
      p.cand_k = want <= cap ? static_cast<int32_t>(want) : 0;
    }
    CERA_CHECK(row.top_logprobs >= 0 && row.top_logprobs <= std::min(kMaxTopLogprobs, n_vocab_));
    p.k_row = std::max(p.cand_k, row.logprobs ? std::max(1, row.top_logprobs) : 0);
    k = std::max(k, p.k_row);
  }
  const Device dev = backend_->device();
  const int32_t* ids = nullptr;
  const float* values = nullptr;
  const float* lse = nullptr;
  if (k > 0) {
    std::byte* base = pick_buffer_->data();
    const TensorView v_ids = make_view(base, DType::kI32, {k, n, 1, 1}, dev);
    const TensorView v_values = make_view(base + 4 * k * n, DType::kF32, {k, n, 1, 1}, dev);
    const TensorView v_lse = make_view(base + 8 * k * n, DType::kF32, {1, n, 1, 1}, dev);
    backend_->top_k(v_ids, v_values, v_lse, logits, {.k = k, .softcap = softcap});
    // One read back of all three (they are contiguous).
    pick_host_.resize(static_cast<size_t>((2 * k + 1) * n));
    backend_->download(pick_host_.data(), make_view(base, DType::kI32, {(2 * k + 1) * n, 1, 1, 1}, dev));
    ids = pick_host_.data();
    values = reinterpret_cast<const float*>(pick_host_.data()) + k * n;
    lse = values + k * n;
    ++stats_.n_top_k_calls;
  }
  auto row_ids = [&](int64_t r) { return std::span<const int32_t>(ids + r * k, plans[r].k_row); };
  auto row_values = [&](int64_t r) { return std::span<const float>(values + r * k, plans[r].k_row); };

  // Biased tokens outside a row's candidates: their raw logits, all rows in one gather.
  std::vector<int32_t> flat;
  std::vector<float> gathered;
  for (int64_t r = 0; r < n; ++r) {
    Plan& p = plans[r];
    p.missing = flat.size();
    if (p.cand_k == 0 || rows[r].logit_bias == nullptr) continue;
    const auto cand = row_ids(r).first(p.cand_k);
    for (const auto& [id, bias] : *rows[r].logit_bias) {
      if (std::find(cand.begin(), cand.end(), id) == cand.end()) flat.push_back(static_cast<int32_t>(r * n_vocab_ + id));
    }
  }
  gather(logits, softcap, flat, gathered);

  std::vector<int32_t> m_ids;
  std::vector<float> m_values;
  std::vector<std::pair<float, int32_t>> merged;
  std::vector<int32_t> flat_chosen;
  std::vector<int64_t> chosen_rows;
  for (int64_t r = 0; r < n; ++r) {
    const SampleRow& row = rows[r];
    Plan& p = plans[r];
    std::optional<int32_t> token;
    if (p.cand_k > 0) {
      const auto c_ids = row_ids(r).first(p.cand_k);
      const auto c_values = row_values(r).first(p.cand_k);
      if (row.logit_bias == nullptr || row.logit_bias->empty()) {
        token = row.sampler->sample_candidates(c_ids.first(p.need), c_values.first(p.need), lse[r]);
      } else {
        const std::map<int32_t, float>& bias = *row.logit_bias;
        merged.clear();
        for (int32_t j = 0; j < p.cand_k; ++j) {
          const auto it = bias.find(c_ids[j]);
          merged.emplace_back(it == bias.end() ? c_values[j] : c_values[j] + it->second, c_ids[j]);
        }
        size_t g = p.missing;
        for (const auto& [id, b] : bias) {
          if (std::find(c_ids.begin(), c_ids.end(), id) == c_ids.end()) merged.emplace_back(gathered[g++] + b, id);
        }
        std::sort(merged.begin(), merged.end(), [](const auto& a, const auto& b) {
          return a.first > b.first || (a.first == b.first && a.second < b.second);
        });
        // The exact prefix: what ranks at or before the last candidate's unbiased key.
        size_t valid = merged.size();
        if (p.cand_k < n_vocab_) {
          const float key_v = c_values.back();
          const int32_t key_id = c_ids.back();
          valid = 0;
          while (valid < merged.size() && (merged[valid].first > key_v ||
                                           (merged[valid].first == key_v && merged[valid].second <= key_id))) {
            ++valid;
          }
        }
        // At most n_bias candidates moved, so the cand_k - n_bias >= need unbiased ones rank there.
        CERA_CHECK_MSG(valid >= static_cast<size_t>(p.need), "batch sampler: too few exact biased candidates");
        m_ids.clear();
        m_values.clear();
        for (int32_t j = 0; j < p.need; ++j) {
          m_values.push_back(merged[j].first);
          m_ids.push_back(merged[j].second);
        }
        // lse is not read: the chain is greedy or cut by top-k (see the plan).
        token = row.sampler->sample_candidates(m_ids, m_values, lse[r]);
      }
    }
    bool have_row = false;
    if (!token) {  // the chain needs every logit
      read_row(logits, softcap, r);
      have_row = true;
      work_ = row_;
      if (row.logit_bias != nullptr) {
        for (const auto& [id, b] : *row.logit_bias) work_[id] += b;
      }
      token = row.sampler->sample(work_, row.history);
    }
    out[r].token = *token;
    if (!row.logprobs) continue;
    const auto l_ids = row_ids(r);
    if (const auto it = std::find(l_ids.begin(), l_ids.end(), *token); it != l_ids.end()) {
      p.chosen_raw = row_values(r)[it - l_ids.begin()];
      p.chosen_known = true;
    } else if (have_row) {
      p.chosen_raw = row_[*token];
      p.chosen_known = true;
    } else {
      flat_chosen.push_back(static_cast<int32_t>(r * n_vocab_ + *token));
      chosen_rows.push_back(r);
    }
  }
  // Chosen tokens outside their row's candidates (a bias forced them, or a draw reached past
  // top_logprobs): one more gather.
  gather(logits, softcap, flat_chosen, gathered);
  for (size_t i = 0; i < chosen_rows.size(); ++i) {
    plans[chosen_rows[i]].chosen_raw = gathered[i];
    plans[chosen_rows[i]].chosen_known = true;
  }
  for (int64_t r = 0; r < n; ++r) {
    if (!rows[r].logprobs) continue;
    const Plan& p = plans[r];
    CERA_CHECK(p.chosen_known);
    // Rounding may leave a hair above 0 for a token holding all the mass.
    auto logprob = [&](float raw) { return std::min(0.0f, raw - lse[r]); };
    TokenLogprobs lp{.chosen = {.token = out[r].token, .logprob = logprob(p.chosen_raw)}};
    for (int32_t j = 0; j < rows[r].top_logprobs; ++j) {
      if (std::isinf(values[r * k + j])) break;  // a grammar forbids the rest (masked: -inf)
      lp.top.push_back({.token = ids[r * k + j], .logprob = logprob(values[r * k + j])});
    }
    out[r].logprobs = std::move(lp);
  }
}

}  // namespace cera::runtime
