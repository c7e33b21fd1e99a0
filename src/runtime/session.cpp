// Prompt processing in n_batch chunks (one forward each, logits only where asked), generation one
// token per forward, context shift when the cache is full, stop strings held back until they can
// no longer match. Pipelined greedy decode keeps two logits rows and two top_k slots: while the
// device runs step N (its embedding reading token N's id from top_k's slot), the host reads token
// N back and, when N ends generation, truncates the cache entry of that step again.
#include "runtime/session.h"

#include <algorithm>

#include "core/check.h"
#include "runtime/stop_strings.h"

namespace cera::runtime {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

// One top_k output slot: ids [k], values [k], lse, for k up to kMaxTopK.
constexpr uint64_t kPickSlotBytes = (2 * ops::TopKParams::kMaxTopK + 1) * 4;

}  // namespace

const char* stop_reason_name(StopReason reason) {
  switch (reason) {
    case StopReason::kEndOfGeneration: return "end of generation";
    case StopReason::kMaxTokens: return "token limit";
    case StopReason::kStopString: return "stop string";
    case StopReason::kCancelled: return "cancelled";
    case StopReason::kContextFull: return "context full";
  }
  return "?";
}

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
  // generation itself allocates nothing.
  ops::Backend& backend = model.backend();
  const int64_t n_vocab = model.hparams().n_vocab;
  CERA_ASSIGN_OR_RETURN(session->logits_buffer_, backend.allocate(static_cast<uint64_t>(2 * n_vocab) * 4));
  for (int row = 0; row < 2; ++row) {
    session->device_logits_[row] = make_view(session->logits_buffer_->data() + row * n_vocab * 4, DType::kF32,
                                             {n_vocab, 1, 1, 1}, backend.device());
  }
  CERA_ASSIGN_OR_RETURN(session->pick_buffer_, backend.allocate(2 * kPickSlotBytes));
  return session;
}

std::span<const float> Session::last_logits() const {
  if (logits_on_device_) {
    logits_.resize(static_cast<size_t>(device_logits_[cur_].n_elements()));
    model_->backend().download(logits_.data(), device_logits_[cur_]);
    model::apply_logit_softcap(logits_, logits_softcap_);
    logits_on_device_ = false;
  }
  return logits_;
}

Session::PickViews Session::pick_views(int slot, int32_t k) const {
  std::byte* base = pick_buffer_->data() + slot * kPickSlotBytes;
  const Device dev = model_->backend().device();
  return {make_view(base, DType::kI32, {k, 1, 1, 1}, dev), make_view(base + 4 * k, DType::kF32, {k, 1, 1, 1}, dev),
          make_view(base + 8 * k, DType::kF32, {1, 1, 1, 1}, dev)};
}

Session::Picked Session::pick_candidates(int32_t k) {
  ops::Backend& backend = model_->backend();
  const PickViews v = pick_views(0, k);
  backend.top_k(v.ids, v.values, v.lse, device_logits_[cur_], {.k = k, .softcap = logits_softcap_});
  // One read back of all three (they are contiguous).
  pick_host_.resize(static_cast<size_t>(2 * k + 1));
  backend.download(pick_host_.data(), make_view(v.ids.data, DType::kI32, {2 * k + 1, 1, 1, 1}, backend.device()));
  const auto* f = reinterpret_cast<const float*>(pick_host_.data());
  return {std::span(pick_host_).first(k), std::span(f + k, k), f[2 * k]};
}

void Session::keep_device_logits(int row) {
  // The model's logits live in its scratch, which the next forward of any session sharing the
  // model overwrites: this session keeps its own copy of the last output row (an exact embed).
  const model::Model::DeviceLogits dl = model_->device_logits();
  const int32_t last = static_cast<int32_t>(dl.view.rows()) - 1;
  model_->backend().embed(device_logits_[row], dl.view, std::span(&last, 1), 1.0f);
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
  pending_.reset();
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
  enc.add_special = options.add_special && tokens_.empty() && !pending_;
  const std::vector<int32_t> ids = tokenizer_.encode(text, enc);
  return append_tokens(ids);
}

Status Session::append_tokens(std::span<const int32_t> tokens, bool all_logits) {
  CERA_RETURN_IF_ERROR(flush_pending());
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

Status Session::flush_pending() {
  if (!pending_) return {};
  const int32_t token = *pending_;
  pending_.reset();
  return evaluate({&token, 1}, false);
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
  // Truncation of a first prompt: its head (n_keep tokens, at least BOS) and its tail.
  int64_t head = std::clamp<int64_t>(options_.n_keep, 0, n_ctx_ / 2);
  if (head == 0 && tokens[0] == tokenizer_.bos()) head = 1;
  const int64_t tail = std::max<int64_t>(1, (n_ctx_ - head) / 2);
  storage.assign(tokens.begin(), tokens.begin() + head);
  storage.insert(storage.end(), tokens.end() - tail, tokens.end());
  stats_.n_prompt_tokens_dropped += n - head - tail;
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
    CERA_RETURN_IF_ERROR(forward_chunk({.tokens = chunk, .all_logits = all_logits, .last = last, .row = cur_}));
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

Status Session::forward_chunk(const Chunk& chunk) {
  const int32_t n_vocab = model_->hparams().n_vocab;
  const int32_t n = static_cast<int32_t>(chunk.tokens.size());
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
  if (chunk.all_logits) {
    for (int32_t i = 0; i < n; ++i) outputs_.push_back(i);
  } else if (chunk.last) {
    outputs_.push_back(n - 1);
  }
  const auto table = cache_.block_table(seq_), ring_table = cache_.ring_table(seq_);
  table_offset_ = {0, static_cast<int32_t>(table.size())};
  ring_offset_ = {0, static_cast<int32_t>(ring_table.size())};
  const model::ForwardBatch batch{.tokens = chunk.tokens,
                                  .token_ids = chunk.token_ids,
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
  if (chunk.all_logits) {
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
  if (!chunk.all_logits && !outputs_.empty()) keep_device_logits(chunk.row);
  return {};
}

bool Session::pipelines(const Sampler& sampler) const {
  if (!sampler.argmax_only()) return false;
  switch (options_.pipeline) {
    case DecodePipeline::kAuto: return model_->backend().overlaps_host();
    case DecodePipeline::kOn: return true;
    case DecodePipeline::kOff: return false;
  }
  return false;
}

void Session::queue_argmax(int row) {
  ops::Backend& backend = model_->backend();
  const PickViews v = pick_views(row, 1);
  backend.top_k(v.ids, v.values, v.lse, device_logits_[row], {.k = 1, .softcap = logits_softcap_});
  CERA_CHECK(!in_flight_[row]);
  in_flight_[row] = backend.download_async(&picked_[row], v.ids);
}

int32_t Session::wait_argmax(int row) {
  CERA_CHECK(in_flight_[row]);
  model_->backend().wait(*in_flight_[row]);
  in_flight_[row].reset();
  return picked_[row];
}

void Session::drain_readbacks() {
  for (int row = 0; row < 2; ++row) {
    if (in_flight_[row]) wait_argmax(row);
  }
}

bool Session::can_speculate(int32_t n_generated, int32_t max_tokens) const {
  // The plain loop evaluates the token unless it is the last allowed one or the cache is full;
  // a full cache means a context shift (or kContextFull), never taken on speculation.
  return n_generated < max_tokens && cache_.length(seq_) + 1 <= n_ctx_;
}

Status Session::speculate() {
  const int next = cur_ ^ 1;
  const TensorView ids = pick_views(cur_, 1).ids;
  const int32_t unknown = 0;  // the id is on the device; only the count is read
  speculated_from_ = cache_.length(seq_);
  const Status st = forward_chunk({.tokens = std::span(&unknown, 1), .token_ids = &ids, .row = next});
  if (!st.ok()) {
    speculated_from_ = -1;  // forward_chunk truncated the entry again
    return st;
  }
  // The rollback of the last append is always possible (KvCache::truncate); checked, since
  // exactness depends on it.
  CERA_CHECK(cache_.can_truncate(seq_, speculated_from_));
  queue_argmax(next);
  return {};
}

void Session::commit_speculation(int32_t token) {
  tokens_.push_back(token);
  cur_ ^= 1;
  speculated_from_ = -1;
}

void Session::roll_back_speculation() {
  if (speculated_from_ < 0) return;
  drain_readbacks();  // the step's own argmax, not needed
  cache_.truncate(seq_, speculated_from_);
  speculated_from_ = -1;
}

Result<GenerateResult> Session::generate(const GenerateOptions& options, const TextSink& sink) {
  cancelled_.store(false);
  CERA_RETURN_IF_ERROR(flush_pending());
  if (!has_logits_) return invalid_argument("nothing to continue from: append a prompt (or BOS) first");
  GenerateResult result;
  Sampler sampler(options.sampling);
  const auto t0 = Clock::now();
  const bool pipelined = pipelines(sampler);
  Status st = generate_loop(options, sampler, pipelined, result, sink);
  if (pipelined) {  // also after an error: nothing may still write into picked_
    roll_back_speculation();
    drain_readbacks();
  }
  CERA_RETURN_IF_ERROR(st);
  stats_.n_generated_tokens += result.n_generated;
  stats_.generation_seconds += seconds_since(t0);
  return result;
}

Status Session::generate_loop(const GenerateOptions& options, Sampler& sampler, bool pipelined,
                              GenerateResult& result, const TextSink& sink) {
  tokenizer::StreamDecoder decoder(tokenizer_);
  std::string held;  // decoded text not yet handed to the sink
  auto emit = [&](size_t n) {
    if (n == 0) return;
    const std::string_view out(held.data(), n);
    if (sink) sink(out);
    result.text.append(out);
    held.erase(0, n);
  };
  bool stopped = false;
  while (!stopped) {
    if (result.n_generated >= options.max_tokens) {
      result.reason = StopReason::kMaxTokens;
      break;
    }
    if (cancelled_.load()) {
      result.reason = StopReason::kCancelled;
      break;
    }
    int32_t token = 0;
    bool speculated = false;
    if (pipelined && logits_on_device_) {
      // The argmax of the current row may already be queued (by the step that made the row).
      if (!in_flight_[cur_]) queue_argmax(cur_);
      if (can_speculate(result.n_generated + 1, options.max_tokens)) {
        CERA_RETURN_IF_ERROR(speculate());
        speculated = true;
      }
      token = wait_argmax(cur_);
    } else {
      token = sample_next(sampler);
    }
    if (options.stop_at_end_of_generation && tokenizer_.is_end_of_generation(token)) {
      result.reason = StopReason::kEndOfGeneration;
      break;  // generate() rolls a speculated step back
    }
    ++result.n_generated;
    decoder.push(token, held);
    for (const std::string& stop : options.stop) {
      if (const size_t at = held.find(stop); !stop.empty() && at != std::string::npos) {
        held.resize(at);
        result.reason = StopReason::kStopString;
        stopped = true;
      }
    }
    if (stopped) break;
    emit(held.size() - held_suffix(held, options.stop));
    if (speculated) {  // the step the plain loop would now evaluate is already queued
      commit_speculation(token);
      continue;
    }
    if (result.n_generated >= options.max_tokens) {
      pending_ = token;  // evaluated lazily, only if the conversation goes on
      continue;
    }
    if (!options_.context_shift && cache_.length(seq_) + 1 > n_ctx_) {
      pending_ = token;
      result.reason = StopReason::kContextFull;
      break;
    }
    CERA_RETURN_IF_ERROR(evaluate({&token, 1}, false));
  }
  if (result.reason != StopReason::kStopString) decoder.finish(held);
  emit(held.size());
  return {};
}

}  // namespace cera::runtime
