// Evaluation in n_batch chunks (one forward each, logits only where asked), a context shift
// before an append that does not fit. The last position's logits stay on the device (a copy of
// the model's row, which the next forward overwrites) until read back or sampled through top_k.
#include "runtime/session.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "runtime/prompt_truncation.h"

namespace cera::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// top_k's outputs: ids [k], values [k], lse, for k up to kMaxTopK.
constexpr uint64_t kPickBytes = (2 * ops::TopKParams::kMaxTopK + 1) * 4;

}  // namespace

Session::Session(model::Model& model, tokenizer::Tokenizer tokenizer, KvCache cache, SessionOptions options,
                 int32_t n_ctx)
    : model_(&model), tokenizer_(std::move(tokenizer)), cache_(std::move(cache)), options_(options), n_ctx_(n_ctx) {
  seq_ = cache_.new_sequence();
}

Result<std::unique_ptr<Session>> Session::create(model::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                 const SessionOptions& options) {
  const int32_t n_ctx = options.n_ctx > 0 ? options.n_ctx : model.hparams().n_ctx_train;
  if (n_ctx <= 0) return invalid_argument("context size must be > 0");
  if (options.n_batch <= 0) return invalid_argument("n_batch must be > 0");
  if (tokenizer.n_vocab() > model.hparams().n_vocab) {
    return invalid_argument("the vocabulary has " + std::to_string(tokenizer.n_vocab()) + " tokens but the model only " +
                            std::to_string(model.hparams().n_vocab));
  }
  CERA_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(model, {.n_slots = n_ctx,
                                                               .block_size = options.kv_block_size,
                                                               .max_batch_tokens = options.n_batch,
                                                               .max_sequences = 1,
                                                               .kv_type = options.kv_type}));
  auto session = std::unique_ptr<Session>(new Session(model, tokenizer, std::move(cache), options, n_ctx));
  // The device buffers of the last logits row and of top_k's candidates, allocated here so that
  // evaluating and sampling allocate nothing.
  ops::Backend& backend = model.backend();
  const int64_t n_vocab = model.hparams().n_vocab;
  CERA_ASSIGN_OR_RETURN(session->logits_buffer_, backend.allocate(static_cast<uint64_t>(n_vocab) * 4));
  session->device_logits_ =
      make_view(session->logits_buffer_->data(), DType::kF32, {n_vocab, 1, 1, 1}, backend.device());
  CERA_ASSIGN_OR_RETURN(session->pick_buffer_, backend.allocate(kPickBytes));
  return session;
}

std::span<const float> Session::last_logits() const {
  if (logits_on_device_) {
    logits_.resize(static_cast<size_t>(device_logits_.n_elements()));
    model_->backend().download(logits_.data(), device_logits_);
    model::apply_logit_softcap(logits_, logits_softcap_);
    logits_on_device_ = false;
  }
  return logits_;
}

Session::Picked Session::pick_candidates(int32_t k) {
  ops::Backend& backend = model_->backend();
  std::byte* base = pick_buffer_->data();
  const Device dev = backend.device();
  const TensorView ids = make_view(base, DType::kI32, {k, 1, 1, 1}, dev);
  const TensorView values = make_view(base + 4 * k, DType::kF32, {k, 1, 1, 1}, dev);
  const TensorView lse = make_view(base + 8 * k, DType::kF32, {1, 1, 1, 1}, dev);
  backend.top_k(ids, values, lse, device_logits_, {.k = k, .softcap = logits_softcap_});
  // One read back of all three (they are contiguous).
  pick_host_.resize(static_cast<size_t>(2 * k + 1));
  backend.download(pick_host_.data(), make_view(base, DType::kI32, {2 * k + 1, 1, 1, 1}, dev));
  const auto* f = reinterpret_cast<const float*>(pick_host_.data());
  return {std::span(pick_host_).first(k), std::span(f + k, k), f[2 * k]};
}

void Session::keep_device_logits() {
  // The model's logits live in its scratch, which the next forward of any session sharing the
  // model overwrites: this session keeps its own copy of the last output row (an exact embed).
  const model::Model::DeviceLogits dl = model_->device_logits();
  const int32_t last = static_cast<int32_t>(dl.view.rows()) - 1;
  model_->backend().embed(device_logits_, dl.view, std::span(&last, 1), 1.0f);
  logits_softcap_ = dl.softcap;
}

int32_t Session::sample_next(Sampler& sampler) {
  CERA_CHECK(has_logits_);
  if (logits_on_device_) {
    const int32_t k = sampler.candidates_needed(model_->hparams().n_vocab);
    if (k > 0) {
      const Picked p = pick_candidates(k);
      if (const std::optional<int32_t> token = sampler.sample_candidates(p.ids, p.values, p.lse)) return *token;
    }
  }
  return sampler.sample(last_logits(), tokens_);
}

void Session::reset() {
  cache_.truncate(seq_, 0);
  tokens_.clear();
  logits_.clear();
  has_logits_ = false;
  logits_on_device_ = false;
  all_logits_.clear();
  n_keep_ = 0;
}

Status Session::append_text(std::string_view text, bool add_bos, bool parse_special) {
  return append_text(text, {.add_special = add_bos, .parse_special = parse_special});
}

Status Session::append_text(std::string_view text, const tokenizer::EncodeOptions& options) {
  tokenizer::EncodeOptions enc = options;
  enc.add_special = options.add_special && tokens_.empty();
  const std::vector<int32_t> ids = tokenizer_.encode(text, enc);
  return append_tokens(ids);
}

Status Session::append_tokens(std::span<const int32_t> tokens, bool all_logits) {
  const bool first = tokens_.empty();
  std::vector<int32_t> storage;
  CERA_ASSIGN_OR_RETURN(const std::span<const int32_t> fitted, fit_append(tokens, all_logits, storage));
  const auto t0 = Clock::now();
  CERA_RETURN_IF_ERROR(evaluate(fitted, all_logits));
  model_->backend().synchronize();  // device work is asynchronous: the timing must include it
  stats_.prompt_seconds += seconds_since(t0);
  stats_.n_prompt_tokens += static_cast<int64_t>(fitted.size());
  if (first) {
    n_keep_ = options_.n_keep < 0 ? static_cast<int32_t>(tokens_.size()) : std::min<int32_t>(options_.n_keep, n_ctx_ / 2);
  }
  return {};
}

Result<std::span<const int32_t>> Session::fit_append(std::span<const int32_t> tokens, bool all_logits,
                                                    std::vector<int32_t>& storage) {
  const int64_t len = cache_.length(seq_);
  const auto n = static_cast<int64_t>(tokens.size());
  if (len + n <= n_ctx_) return tokens;
  const int64_t keep = std::min<int64_t>(n_keep_, len);  // what a shift of the history keeps
  const std::string sizes = std::to_string(n) + " tokens";
  if (n <= n_ctx_ - keep) {
    if (!options_.context_shift) {
      return out_of_range("context is full: the " + std::to_string(len) + " tokens in it and " + sizes +
                          " more exceed the context size of " + std::to_string(n_ctx_) +
                          " tokens; use a larger context or allow context shifts");
    }
    // One shift for the whole append: llama.cpp's half of the unkept history, or more if needed.
    const int64_t discard = std::max((len - keep) / 2, len + n - n_ctx_);
    CERA_RETURN_IF_ERROR(shift_history(static_cast<int32_t>(keep), static_cast<int32_t>(discard)));
    return tokens;
  }
  const int32_t n_train = model_->hparams().n_ctx_train;
  std::string why = (len == 0 ? "the prompt is " + sizes : "the new text is " + sizes + " (with " + std::to_string(keep) +
                                                               " kept tokens of the conversation)") +
                    ", longer than the context of " + std::to_string(n_ctx_) + " tokens";
  if (n_train > n_ctx_) why += " (the model was trained with " + std::to_string(n_train) + ")";
  if (len > 0 || all_logits || !options_.truncate_long_prompt) {
    return out_of_range(why + ": use a larger context" +
                        (len > 0 || all_logits ? std::string() : std::string(", or let long prompts be truncated")) +
                        ", or shorten the text");
  }
  stats_.n_prompt_tokens_dropped += truncate_long_prompt(tokens, n_ctx_, options_.n_keep, tokenizer_.bos(), storage);
  return std::span<const int32_t>(storage);
}

Status Session::make_room(int32_t n_tokens) {
  const int32_t len = cache_.length(seq_);
  if (len + n_tokens <= n_ctx_) return {};
  if (!options_.context_shift || n_tokens > n_ctx_ / 2) {
    return out_of_range("context is full: " + std::to_string(len) + " + " + std::to_string(n_tokens) + " tokens exceed " +
                        std::to_string(n_ctx_));
  }
  // llama.cpp's rule: keep the first n_keep, drop half of the rest.
  const int32_t keep = std::min(n_keep_, len - 1);
  const int32_t discard = std::max(1, (len - keep) / 2);
  CERA_RETURN_IF_ERROR(shift_history(keep, discard));
  return make_room(n_tokens);
}

Status Session::shift_history(int32_t keep, int32_t discard) {
  if (!cache_.can_shift(seq_, keep, discard)) {
    return out_of_range("context shift keeping " + std::to_string(keep) + " of " +
                        std::to_string(cache_.length(seq_)) +
                        " tokens: the sliding-window layers no longer hold the kept tokens near the new end");
  }
  cache_.shift(seq_, keep, discard);
  tokens_.erase(tokens_.begin() + keep, tokens_.begin() + keep + discard);
  ++stats_.n_context_shifts;
  return {};
}

Status Session::evaluate(std::span<const int32_t> tokens, bool all_logits) {
  const int32_t n_vocab = model_->hparams().n_vocab;
  if (all_logits) all_logits_.clear();
  for (size_t first = 0; first < tokens.size(); first += options_.n_batch) {
    const auto chunk = tokens.subspan(first, std::min<size_t>(options_.n_batch, tokens.size() - first));
    const bool last = first + chunk.size() == tokens.size();
    CERA_RETURN_IF_ERROR(forward_chunk(chunk, all_logits, last));
    if (!all_logits && last) has_logits_ = logits_on_device_ = true;
    tokens_.insert(tokens_.end(), chunk.begin(), chunk.end());
  }
  if (all_logits && !tokens.empty()) {
    logits_.assign(all_logits_.end() - n_vocab, all_logits_.end());
    has_logits_ = true;
    logits_on_device_ = false;
  }
  return {};
}

Status Session::forward_chunk(std::span<const int32_t> tokens, bool all_logits, bool last) {
  const int32_t n_vocab = model_->hparams().n_vocab;
  const int32_t n = static_cast<int32_t>(tokens.size());
  CERA_RETURN_IF_ERROR(make_room(n));
  const int32_t start = cache_.length(seq_);
  slots_.clear();
  ring_slots_.clear();
  CERA_RETURN_IF_ERROR(cache_.append(seq_, n, slots_));
  for (int32_t i = start; cache_.ring_tokens() > 0 && i < start + n; ++i) ring_slots_.push_back(cache_.ring_slot(seq_, i));
  positions_.resize(n);
  token_seq_.assign(n, 0);
  for (int32_t i = 0; i < n; ++i) positions_[i] = start + i;
  outputs_.clear();
  if (all_logits) {
    for (int32_t i = 0; i < n; ++i) outputs_.push_back(i);
  } else if (last) {
    outputs_.push_back(n - 1);
  }
  const auto table = cache_.block_table(seq_), ring_table = cache_.ring_table(seq_);
  table_offset_ = {0, static_cast<int32_t>(table.size())};
  ring_offset_ = {0, static_cast<int32_t>(ring_table.size())};
  const model::ForwardBatch batch{.tokens = tokens,
                                  .attention = {.positions = positions_,
                                                .token_seq = token_seq_,
                                                .block_tables = table,
                                                .table_offset = table_offset_},
                                  .kv_slots = slots_,
                                  .ring = {.block_tables = ring_table, .table_offset = ring_offset_, .kv_slots = ring_slots_},
                                  .output_rows = outputs_,
                                  .recurrent_state = cache_.recurrent_state(seq_)};
  // Without all_logits the last position's logits stay on the device until they are read.
  std::span<float> out;
  if (all_logits) {
    const size_t base = all_logits_.size();
    all_logits_.resize(base + outputs_.size() * n_vocab);
    out = std::span(all_logits_).subspan(base);
  }
  const Status st = model_->forward(batch, cache_.layers(), out);
  if (!st.ok()) {
    cache_.truncate(seq_, start);
    has_logits_ = logits_on_device_ = false;
    return st;
  }
  if (!all_logits && !outputs_.empty()) keep_device_logits();
  return {};
}

}  // namespace cera::runtime
