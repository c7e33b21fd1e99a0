#include "runtime/embed/embedder.h"

#include <algorithm>
#include <string>

namespace cera::runtime::embed {

std::vector<int32_t> tokenize_for_embedding(const tokenizer::Tokenizer& tokenizer, std::string_view text) {
  return tokenizer.encode(text, {.add_special = true});
}

Result<std::unique_ptr<Embedder>> Embedder::create(model::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                   const EmbedderOptions& options) {
  if (options.max_batch_tokens < 1) return invalid_argument("embedder: max_batch_tokens must be at least 1");
  if (options.max_sequences < 1) return invalid_argument("embedder: max_sequences must be at least 1");
  constexpr int32_t kBlock = 16;
  // Every text takes whole blocks: room for the batch's tokens plus a partly filled block each.
  const int64_t slots = int64_t{options.max_batch_tokens} + int64_t{kBlock} * options.max_sequences;
  KvCacheConfig config{.n_slots = static_cast<int32_t>(slots),
                       .block_size = kBlock,
                       .max_batch_tokens = options.max_batch_tokens,
                       .max_sequences = options.max_sequences,
                       .kv_type = options.kv_type,
                       // Sliding-window layers are then paged like the others instead of one
                       // ring per sequence (a ring is window + max_batch_tokens slots: for 64
                       // short texts that would be 64 rings). Nothing is ever published.
                       .prefix_cache = model.kv_geometry().has_sliding()};
  CERA_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(model, config));
  return std::unique_ptr<Embedder>(new Embedder(model, tokenizer, std::move(cache), options));
}

Embedder::Embedder(model::Model& model, const tokenizer::Tokenizer& tokenizer, KvCache cache,
                   const EmbedderOptions& options)
    : model_(model), tokenizer_(tokenizer), cache_(std::move(cache)), options_(options) {
  const model::HParams& hp = model.hparams();
  n_embd_ = hp.n_embd;
  default_normalize_ = hp.embedding_normalize;
  default_pooling_ = default_pooling(model);
  max_input_tokens_ = options.max_batch_tokens;
  if (!model.causal() && hp.n_ctx_train > 0) max_input_tokens_ = std::min(max_input_tokens_, hp.n_ctx_train);
}

Pooling Embedder::default_pooling(const model::Model& model) {
  if (const auto p = pooling_from_gguf(model.hparams().pooling_type)) return *p;
  return model.causal() ? Pooling::kLast : Pooling::kMean;
}

std::vector<int32_t> Embedder::tokenize(std::string_view text) const { return tokenize_for_embedding(tokenizer_, text); }

Status Embedder::check_inputs(std::span<const std::vector<int32_t>> inputs) const {
  const int32_t n_vocab = model_.hparams().n_vocab;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto& ids = inputs[i];
    if (ids.empty()) return invalid_argument("input " + std::to_string(i) + " is empty: there is nothing to embed");
    if (ids.size() > static_cast<size_t>(max_input_tokens_)) {
      const bool by_context = max_input_tokens_ < options_.max_batch_tokens;
      return out_of_range("input " + std::to_string(i) + " is " + std::to_string(ids.size()) +
                          " tokens, more than the " + std::to_string(max_input_tokens_) + " an embedding takes (" +
                          (by_context ? "the model's context_length; shorten the text"
                                      : "max_batch_tokens; raise it or shorten the text") +
                          ")");
    }
    for (const int32_t id : ids) {
      if (id < 0 || id >= n_vocab) {
        return invalid_argument("input " + std::to_string(i) + " has token id " + std::to_string(id) +
                                ", outside the vocabulary [0, " + std::to_string(n_vocab) + ")");
      }
    }
  }
  return {};
}

Result<std::vector<Embedding>> Embedder::embed(std::span<const std::vector<int32_t>> inputs,
                                               const EmbedOptions& options) {
  CERA_RETURN_IF_ERROR(check_inputs(inputs));
  const Pooling pooling = options.pooling.value_or(default_pooling_);
  const bool normalize = options.normalize.value_or(default_normalize_);
  std::vector<Embedding> out;
  out.reserve(inputs.size());
  // Greedy packing in the caller's order: results come back in order and each forward is full.
  size_t first = 0;
  while (first < inputs.size()) {
    size_t last = first;
    int64_t tokens = 0;
    while (last < inputs.size() && last - first < static_cast<size_t>(options_.max_sequences) &&
           tokens + static_cast<int64_t>(inputs[last].size()) <= options_.max_batch_tokens) {
      tokens += static_cast<int64_t>(inputs[last].size());
      ++last;
    }
    CERA_RETURN_IF_ERROR(forward_group(inputs, first, last, pooling, normalize, out));
    first = last;
  }
  return out;
}

Status Embedder::forward_group(std::span<const std::vector<int32_t>> inputs, size_t first, size_t last,
                               Pooling pooling, bool normalize, std::vector<Embedding>& out) {
  tokens_.clear();
  positions_.clear();
  token_seq_.clear();
  slots_.clear();
  ring_slots_.clear();
  outputs_.clear();
  std::vector<SeqId> seqs;
  seqs.reserve(last - first);
  // Sequences are freed on every path out: the cache is the embedder's and starts empty each time.
  struct Release {
    KvCache& cache;
    std::vector<SeqId>& seqs;
    ~Release() {
      for (SeqId s : seqs) cache.free_sequence(s);
    }
  } release{cache_, seqs};
  const bool ring = cache_.ring_tokens() > 0;
  for (size_t i = first; i < last; ++i) {
    const auto& ids = inputs[i];
    const auto n = static_cast<int32_t>(ids.size());
    const SeqId seq = cache_.new_sequence();
    seqs.push_back(seq);
    CERA_RETURN_IF_ERROR(cache_.append(seq, n, slots_));
    const auto j = static_cast<int32_t>(i - first);
    const auto row0 = static_cast<int32_t>(tokens_.size());
    for (int32_t t = 0; t < n; ++t) {
      tokens_.push_back(ids[static_cast<size_t>(t)]);
      positions_.push_back(t);
      token_seq_.push_back(j);
      if (ring) ring_slots_.push_back(cache_.ring_slot(seq, t));
    }
    switch (pooling) {
      case Pooling::kNone:
      case Pooling::kMean:
        for (int32_t t = 0; t < n; ++t) outputs_.push_back(row0 + t);
        break;
      case Pooling::kCls: outputs_.push_back(row0); break;
      case Pooling::kLast: outputs_.push_back(row0 + n - 1); break;
    }
  }
  tables_.clear();
  ring_tables_.clear();
  table_offset_.assign(1, 0);
  ring_offset_.assign(1, 0);
  state_.clear();
  for (const SeqId seq : seqs) {
    const auto table = cache_.block_table(seq), ring_table = cache_.ring_table(seq);
    tables_.insert(tables_.end(), table.begin(), table.end());
    table_offset_.push_back(static_cast<int32_t>(tables_.size()));
    ring_tables_.insert(ring_tables_.end(), ring_table.begin(), ring_table.end());
    ring_offset_.push_back(static_cast<int32_t>(ring_tables_.size()));
    const auto state = cache_.recurrent_state(seq);
    state_.insert(state_.end(), state.begin(), state.end());
  }
  const model::ForwardBatch batch{
      .tokens = tokens_,
      .attention = {.positions = positions_, .token_seq = token_seq_, .block_tables = tables_, .table_offset = table_offset_},
      .kv_slots = slots_,
      .ring = ring ? model::RingTables{.block_tables = ring_tables_, .table_offset = ring_offset_, .kv_slots = ring_slots_}
                   : model::RingTables{},
      .output_rows = outputs_,
      .output = model::ForwardOutput::kHidden,
      .recurrent_state = state_};
  const size_t width = static_cast<size_t>(n_embd_);
  hidden_.resize(outputs_.size() * width);
  CERA_RETURN_IF_ERROR(model_.forward(batch, cache_.layers(), hidden_));
  // The output rows come back in order: each text's rows are consecutive.
  size_t row = 0;
  for (size_t i = first; i < last; ++i) {
    const size_t n_tokens = inputs[i].size();
    const size_t n_rows = pooling == Pooling::kNone || pooling == Pooling::kMean ? n_tokens : 1;
    const std::span<const float> rows(hidden_.data() + row * width, n_rows * width);
    Embedding e{.values = pool(rows, n_embd_, pooling), .n_tokens = static_cast<int32_t>(n_tokens)};
    if (normalize) l2_normalize(e.values, n_embd_);
    out.push_back(std::move(e));
    row += n_rows;
  }
  return {};
}

}  // namespace cera::runtime::embed
