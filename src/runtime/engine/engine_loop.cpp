// A step: under the mutex, cancelled requests are collected and the scheduler plans; outside it,
// preempted requests' sequences are freed, the plan becomes one ForwardBatch (each request's
// chunk contiguous, in plan order), the model runs it, and every output row is sampled with its
// request's own Sampler (BatchSampler: one device top_k for all rows). A preempted request
// keeps its tokens, sampler (RNG position included), decoder and held text: its recompute only
// rebuilds K/V (and recurrent state) for the tokens it had, and the row that completes them
// samples the next new token, so its output is unchanged. The stop-string and end-of-generation
// rules of every front end live here (take_token; held_suffix: runtime/stop_strings.h).
#include "runtime/engine/engine_loop.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cmath>
#include <string>

#include "core/check.h"
#include "runtime/grammar/token_matcher.h"
#include "runtime/stop_strings.h"

namespace cera::runtime {

struct EngineLoop::Live {
  Live(RequestParams p, const tokenizer::Tokenizer& tokenizer)
      : params(std::move(p)),
        tokens(params.prompt),
        sampler(params.sampling),
        decoder(tokenizer, {.render_special = params.render_special_tokens}) {
    if (params.grammar.tables != nullptr && params.grammar.trigger_tokens.empty()) start_grammar();
  }
  void start_grammar() {
    matcher = std::make_unique<grammar::TokenMatcher>(params.grammar.tables);
    // validate() checked that a fresh matcher takes it.
    if (!params.grammar.trigger_text.empty()) CERA_CHECK(matcher->accept_bytes(params.grammar.trigger_text));
  }
  std::shared_ptr<detail::RequestShared> shared = std::make_shared<detail::RequestShared>();
  RequestParams params;
  std::vector<int32_t> tokens;  // [n_tokens] prompt + output so far
  Sampler sampler;
  tokenizer::StreamDecoder decoder;
  std::string held;  // decoded text not yet handed to on_text
  RequestResult result;
  SeqId seq = -1;  // its KV sequence while running
  bool admitted_before = false;  // n_cached_tokens counts the first admission only
  std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point first_token;  // set with the first generated token
  // With params.grammar, once it constrains (at once, or after a trigger token): the matcher
  // follows every generated token; mask is its allowed set for the row being sampled.
  std::unique_ptr<grammar::TokenMatcher> matcher;
  std::vector<uint32_t> mask;  // [ceil(n_vocab / 32)]
  bool mask_empty = false;     // the grammar allowed no token of the vocabulary for this row
};

// Called from Scheduler::schedule(), i.e. on the loop's thread with mu_ held: it may read live_
// and use the cache.
class EngineLoop::LoopPool final : public KvPoolView {
 public:
  explicit LoopPool(EngineLoop& loop) : loop_(loop) {}
  int32_t n_available_blocks() const override { return loop_.cache_.n_free_blocks(); }
  Prefix cached_prefix(RequestId id) const override {
    const Live& l = *loop_.live_.at(id);
    const KvCache::PrefixMatch m = loop_.cache_.match_prefix(l.tokens, l.params.cache_salt);
    return {.n_tokens = m.n_tokens, .n_blocks = m.n_blocks, .n_unreferenced = m.n_unreferenced};
  }
  int32_t open(RequestId id) override { return loop_.open_sequence(*loop_.live_.at(id)); }
  void release(RequestId id) override { loop_.release_sequence(*loop_.live_.at(id)); }

 private:
  EngineLoop& loop_;
};

EngineLoop::EngineLoop(model::Model& model, tokenizer::Tokenizer tokenizer, KvCache cache, BatchSampler sampler,
                       const SchedulerConfig& sc, int32_t n_ctx, DecodePipeline pipeline)
    : model_(&model),
      tokenizer_(std::move(tokenizer)),
      pipeline_(pipeline),
      cache_(std::move(cache)),
      batch_sampler_(std::move(sampler)),
      n_ctx_(n_ctx),
      n_vocab_(model.hparams().n_vocab),
      max_batch_tokens_(sc.max_batch_tokens),
      pool_view_(std::make_unique<LoopPool>(*this)),
      scheduler_(sc, pool_view_.get()) {
  stats_.n_kv_blocks = cache_.n_blocks();
  stats_.n_kv_blocks_free = cache_.n_free_blocks();
}

Result<std::unique_ptr<EngineLoop>> EngineLoop::create(model::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                       const EngineLoopOptions& options) {
  int64_t n_ctx = options.n_ctx > 0 ? options.n_ctx : model.hparams().n_ctx_train;
  if (n_ctx <= 0) return invalid_argument("engine loop: the context size must be > 0");
  if (options.max_batch_tokens <= 0 || options.max_running <= 0 || options.max_waiting <= 0 ||
      options.kv_block_size <= 0 || options.kv_tokens < 0) {
    return invalid_argument("engine loop: max_batch_tokens, max_running, max_waiting and kv_block_size must be > 0, "
                            "kv_tokens >= 0");
  }
  if (tokenizer.n_vocab() > model.hparams().n_vocab) {
    return invalid_argument("the vocabulary has " + std::to_string(tokenizer.n_vocab()) + " tokens but the model only " +
                            std::to_string(model.hparams().n_vocab));
  }
  const int64_t kv_tokens = options.kv_tokens > 0 ? options.kv_tokens : int64_t{options.max_running} * n_ctx;
  const int64_t n_blocks = (kv_tokens + options.kv_block_size - 1) / options.kv_block_size;
  if (n_blocks * options.kv_block_size > INT32_MAX) {
    return out_of_range("engine loop: a KV pool of " + std::to_string(kv_tokens) + " tokens");
  }
  const auto n_slots = static_cast<int32_t>(n_blocks * options.kv_block_size);
  n_ctx = std::min<int64_t>(n_ctx, n_slots);  // a request alone always fits the pool
  CERA_ASSIGN_OR_RETURN(KvCache cache, KvCache::create(model, {.n_slots = n_slots,
                                                               .block_size = options.kv_block_size,
                                                               .max_batch_tokens = options.max_batch_tokens,
                                                               .max_sequences = options.max_running,
                                                               .kv_type = options.kv_type,
                                                               .prefix_cache = options.prefix_cache}));
  CERA_ASSIGN_OR_RETURN(BatchSampler sampler,
                        BatchSampler::create(model.backend(), model.hparams().n_vocab, options.max_running));
  const SchedulerConfig sc{.max_batch_tokens = options.max_batch_tokens,
                           .max_running = options.max_running,
                           .max_waiting = options.max_waiting,
                           .block_size = options.kv_block_size,
                           .n_blocks = static_cast<int32_t>(n_blocks),
                           .n_ctx = static_cast<int32_t>(n_ctx)};
  auto loop = std::unique_ptr<EngineLoop>(
      new EngineLoop(model, tokenizer, std::move(cache), std::move(sampler), sc, static_cast<int32_t>(n_ctx),
                     options.pipeline));
  loop->thread_ = std::thread([p = loop.get()] { p->run(); });
  return loop;
}

EngineLoop::~EngineLoop() { shutdown(ShutdownMode::kCancel); }

Status EngineLoop::validate(const RequestParams& params) const {
  if (params.prompt.empty()) return invalid_argument("the request has an empty prompt (BOS at least is needed)");
  for (int32_t t : params.prompt) {
    if (t < 0 || t >= n_vocab_) {
      return invalid_argument("prompt token " + std::to_string(t) + " is outside the vocabulary of " +
                              std::to_string(n_vocab_));
    }
  }
  if (params.max_tokens < 0) return invalid_argument("max_tokens must be >= 0");
  for (const auto& [t, bias] : params.logit_bias) {
    if (t < 0 || t >= n_vocab_) {
      return invalid_argument("logit_bias token " + std::to_string(t) + " is outside the vocabulary of " +
                              std::to_string(n_vocab_));
    }
    if (!std::isfinite(bias) || std::fabs(bias) > kMaxAbsLogitBias) {
      return invalid_argument("logit_bias of token " + std::to_string(t) + " is " + std::to_string(bias) +
                              ": a bias must be finite, at most 1e30 in magnitude");
    }
  }
  const int32_t max_top = std::min(kMaxTopLogprobs, n_vocab_);
  if (params.top_logprobs < 0 || params.top_logprobs > max_top) {
    return invalid_argument("top_logprobs is " + std::to_string(params.top_logprobs) + ": it must be in 0.." +
                            std::to_string(max_top));
  }
  if (params.top_logprobs > 0 && !params.logprobs) return invalid_argument("top_logprobs needs logprobs");
  if (const GrammarConstraint& g = params.grammar; g.tables != nullptr) {
    if (g.tables->vocab().n_vocab() != tokenizer_.n_vocab()) {
      return invalid_argument("the grammar was prepared for a vocabulary of " + std::to_string(g.tables->vocab().n_vocab()) +
                              " tokens, this model's tokenizer has " + std::to_string(tokenizer_.n_vocab()) +
                              ": build its tables from this model's tokenizer");
    }
    for (int32_t t : g.trigger_tokens) {
      if (t < 0 || t >= n_vocab_) {
        return invalid_argument("grammar trigger token " + std::to_string(t) + " is outside the vocabulary of " +
                                std::to_string(n_vocab_));
      }
    }
    if (!g.trigger_text.empty()) {
      if (g.trigger_tokens.empty()) return invalid_argument("a grammar trigger text needs trigger tokens");
      if (!grammar::TokenMatcher(g.tables).accept_bytes(g.trigger_text)) {
        return invalid_argument("the grammar's sentences do not start with its trigger text '" + g.trigger_text + "'");
      }
    }
  } else if (!params.grammar.trigger_tokens.empty()) {
    return invalid_argument("grammar trigger tokens were given without a grammar");
  }
  if (params.context_shift.n_keep < 0) {
    return invalid_argument("context_shift.n_keep is " + std::to_string(params.context_shift.n_keep) + ": it must be >= 0");
  }
  return {};
}

RequestHandle EngineLoop::enqueue_locked(std::unique_ptr<Live> live) {
  std::shared_ptr<detail::RequestShared> shared = live->shared;
  shared->id = next_id_;
  if (live->params.max_tokens == 0) {  // nothing to generate: done without running
    ++next_id_;
    live->result.context = live->params.prompt;
    std::lock_guard done(shared->mu);
    shared->result = std::move(live->result);
    shared->done = true;
    return RequestHandle(shared);
  }
  // can_add passed under this lock: add cannot fail.
  const Status added = scheduler_.add(shared->id, live->result.n_prompt);
  CERA_CHECK(added.ok());
  live_.emplace(next_id_++, std::move(live));
  return RequestHandle(shared);
}

Result<RequestHandle> EngineLoop::submit(RequestParams params) {
  std::vector<RequestParams> one;
  one.push_back(std::move(params));
  auto handles = submit_all(std::move(one));
  if (!handles.ok()) return handles.status();
  return (*handles)[0];
}

Result<std::vector<RequestHandle>> EngineLoop::submit_all(std::vector<RequestParams> batch) {
  const size_t n = batch.size();
  auto which = [&](size_t i) { return "request " + std::to_string(i + 1) + " of " + std::to_string(n); };
  std::vector<std::unique_ptr<Live>> lives;
  std::vector<int32_t> queued_prompts;  // those the scheduler takes (max_tokens > 0)
  for (size_t i = 0; i < n; ++i) {
    Status s = validate(batch[i]);
    if (!s.ok()) return n == 1 ? s : s.with_context(which(i));
    const auto n_prompt = static_cast<int32_t>(batch[i].prompt.size());
    if (batch[i].max_tokens > 0) queued_prompts.push_back(n_prompt);
    lives.push_back(std::make_unique<Live>(std::move(batch[i]), tokenizer_));
    lives.back()->result.n_prompt = n_prompt;
  }
  std::vector<RequestHandle> handles;
  handles.reserve(n);
  {
    std::lock_guard lock(mu_);
    if (stopping_) return Status(ErrorCode::kCancelled, "the engine loop is shutting down");
    CERA_RETURN_IF_ERROR(scheduler_.can_add(queued_prompts));
    for (auto& live : lives) handles.push_back(enqueue_locked(std::move(live)));
  }
  wake_.notify_one();
  return handles;
}

void EngineLoop::shutdown(ShutdownMode mode) {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
    if (mode == ShutdownMode::kCancel) cancel_all_ = true;
  }
  wake_.notify_one();
  std::lock_guard join(join_mu_);
  if (thread_.joinable()) thread_.join();
}

EngineLoopStats EngineLoop::stats() const {
  std::lock_guard lock(mu_);
  EngineLoopStats s = stats_;
  s.n_preemptions = scheduler_.n_preemptions();
  s.n_running = scheduler_.n_running();
  s.n_waiting = scheduler_.n_waiting();
  return s;
}

Status EngineLoop::check_pool_after_shutdown() const {
  if (thread_.joinable()) return invalid_argument("the engine loop is still running: shut it down first");
  CERA_RETURN_IF_ERROR(cache_.check_integrity());
  CERA_RETURN_IF_ERROR(scheduler_.check_integrity());
  if (cache_.n_live_sequences() != 0 || !live_.empty() || !scheduler_.idle()) {
    return Status(ErrorCode::kInternal, std::to_string(cache_.n_live_sequences()) + " KV sequences and " +
                                            std::to_string(live_.size()) + " requests are still live");
  }
  // Cached blocks nobody references count as free (appends evict them). The scheduler's count
  // dates from its last step (finishes since are not in it): its integrity check covers it.
  if (cache_.n_free_blocks() != cache_.n_blocks()) {
    return Status(ErrorCode::kInternal, std::to_string(cache_.n_free_blocks()) + " of " +
                                            std::to_string(cache_.n_blocks()) + " KV blocks are free or cached");
  }
  return {};
}

struct EngineLoop::Job {
  const std::function<void()>* body = nullptr;
  bool done = false;  // guarded by mu_
};

Status EngineLoop::run_exclusive(const std::function<void()>& job) {
  Job j{.body = &job};
  std::unique_lock lock(mu_);
  if (stopping_) return unavailable("the engine loop is shutting down: no more work can run on it");
  jobs_.push_back(&j);
  wake_.notify_one();
  job_done_.wait(lock, [&] { return j.done; });
  return {};
}

void EngineLoop::run_jobs(std::unique_lock<std::mutex>& lock) {
  while (!jobs_.empty()) {
    Job* j = jobs_.front();
    jobs_.pop_front();
    lock.unlock();
    (*j->body)();
    lock.lock();
    j->done = true;
    job_done_.notify_all();
  }
}

void EngineLoop::run() {
  while (step()) {
  }
}

bool EngineLoop::step() {
  std::vector<Live*> cancelled;
  {
    std::unique_lock lock(mu_);
    stats_.n_kv_blocks_free = cache_.n_free_blocks();  // before an idle wait too: it shows the pool at rest
    wake_.wait(lock, [&] { return stopping_ || !scheduler_.idle() || !jobs_.empty(); });
    if (!jobs_.empty() && !ahead_) {  // nothing in flight: plan_ahead queues no step while jobs wait
      run_jobs(lock);
      return true;
    }
    if (scheduler_.idle()) {  // stopping, and nothing is left
      drop_ahead();
      run_jobs(lock);  // those queued before stopping_ was set
      return false;
    }
    for (auto& [id, l] : live_) {
      if (cancel_all_ || l->shared->cancelled.load()) cancelled.push_back(l.get());
    }
  }
  for (Live* l : cancelled) finish(*l, FinishReason::kCancelled);
  Work work;
  if (ahead_ && std::any_of(ahead_->rows.begin(), ahead_->rows.end(), [](const Live* l) { return l != nullptr; })) {
    work = std::move(*ahead_);  // issued last step: its logits are (or will be) on the device
  } else {
    drop_ahead();  // every row of it ended
    if (!start_step(work)) return true;
  }
  ahead_.reset();
  // Greedy rows on a device that overlaps the host: the step's argmax stays on the device (a step
  // queued ahead has it queued already), the next step is queued on it, and that step's own
  // argmax is queued behind it, so both reach the device before the host waits for this one.
  int slot = work.argmax_slot;
  if (slot < 0 && pipelines() && argmax_rows(work)) slot = queue_argmax(work);
  if (slot >= 0) {
    std::optional<Work> next = plan_ahead(work);
    Status st;
    // A row with a grammar needs this step's token before the next step's mask: then the next
    // step's argmax is queued after the tokens are taken, while its forward runs.
    const bool masks_next = next && has_grammar_rows(*next);
    if (next) {
      st = forward(*next, &work.argmax_ids);
      if (st.ok() && !masks_next) queue_argmax(*next);
      if (st.ok() && masks_next) model_->backend().flush();  // runs while the host waits and masks
    }
    const std::span<const int32_t> picked = batch_sampler_.wait_argmax(slot);
    {
      std::lock_guard lock(mu_);
      stats_.n_sampled += static_cast<int64_t>(picked.size());
    }
    if (!st.ok()) {  // the next step's rows are this step's requests
      for (Live* l : work.rows) {
        if (l != nullptr) finish(*l, FinishReason::kError, st);
      }
      return true;
    }
    if (next) ahead_ = std::move(next);  // before any row is taken: finish() discards its queued row
    for (size_t i = 0; i < work.rows.size(); ++i) {
      if (work.rows[i] == nullptr) continue;  // ended while this step was queued
      SampledToken t{.token = picked[i]};
      take_token(*work.rows[i], t, /*counted=*/ahead_.has_value());
    }
    if (masks_next && ahead_ &&
        std::any_of(ahead_->rows.begin(), ahead_->rows.end(), [](const Live* l) { return l != nullptr; })) {
      queue_argmax(*ahead_);
    }
    return true;
  }
  sample_rows(work);
  // Every row is sampled before any is taken: take_token may finish (and free) a request.
  size_t row = 0;
  for (size_t i = 0; i < work.rows.size(); ++i) {
    if (!work.plan.chunks[i].output) continue;
    take_token(*work.rows[i], sampled_[row++]);
  }
  return true;
}

void EngineLoop::drop_ahead() {
  if (!ahead_) return;
  if (ahead_->argmax_slot >= 0) batch_sampler_.wait_argmax(ahead_->argmax_slot);  // unread, but redeemed
  ahead_.reset();
}

bool EngineLoop::start_step(Work& work) {
  {
    std::lock_guard lock(mu_);
    if (scheduler_.idle()) return false;
    work.plan = scheduler_.schedule();
    for (RequestId id : work.plan.preempted) work.preempted.push_back(live_.at(id).get());
    for (const ScheduledChunk& c : work.plan.chunks) work.rows.push_back(live_.at(c.id).get());
    ++stats_.n_steps;
    stats_.n_forward_tokens += work.plan.n_tokens();
    stats_.max_rows_in_step = std::max(stats_.max_rows_in_step, static_cast<int32_t>(work.rows.size()));
  }
  for (Live* l : work.preempted) ++l->result.n_preemptions;  // their sequences went in schedule() (LoopPool::release)
  if (work.plan.chunks.empty()) return false;
  if (const Status st = forward(work); !st.ok()) {
    for (Live* l : work.rows) finish(*l, FinishReason::kError, st);
    return false;
  }
  return true;
}

bool EngineLoop::pipelines() const {
  switch (pipeline_) {
    case DecodePipeline::kAuto: return model_->backend().overlaps_host();
    case DecodePipeline::kOn: return true;
    case DecodePipeline::kOff: return false;
  }
  return false;
}

bool EngineLoop::argmax_rows(const Work& work) const {
  for (size_t i = 0; i < work.rows.size(); ++i) {
    const Live* l = work.rows[i];
    if (l == nullptr || !work.plan.chunks[i].output) return false;
    const RequestParams& p = l->params;
    // Grammar rows qualify: their masks are applied before the argmax is queued (queue_argmax).
    if (!l->sampler.argmax_only() || p.logprobs || !p.logit_bias.empty()) return false;
  }
  return true;
}

bool EngineLoop::has_grammar_rows(const Work& work) const {
  return std::any_of(work.rows.begin(), work.rows.end(),
                     [](const Live* l) { return l != nullptr && l->params.grammar.tables != nullptr; });
}

void EngineLoop::mask_argmax_rows(const Work& work, const TensorView& logits) {
  const auto start = std::chrono::steady_clock::now();
  const size_t n_words = static_cast<size_t>((n_vocab_ + 31) / 32);
  masks_.clear();
  mask_rows_.clear();
  for (size_t i = 0; i < work.rows.size(); ++i) {
    Live* l = work.rows[i];
    if (l == nullptr || l->matcher == nullptr) continue;
    l->mask.assign(n_words, 0u);
    l->matcher->fill_mask(l->mask);
    l->mask_empty = std::all_of(l->mask.begin(), l->mask.end(), [](uint32_t w) { return w == 0; });
    if (l->mask_empty) continue;  // drawn unmasked; take_token ends it
    masks_.insert(masks_.end(), l->mask.begin(), l->mask.end());
    mask_rows_.push_back(static_cast<int32_t>(i));  // every row of an argmax step is an output row
  }
  if (!mask_rows_.empty()) model_->backend().mask_logits(logits, masks_, mask_rows_);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::lock_guard lock(mu_);
  stats_.n_masked_rows += static_cast<int64_t>(mask_rows_.size());
  stats_.mask_seconds += seconds;
}

int EngineLoop::queue_argmax(Work& work) {
  const model::Model::DeviceLogits dl = model_->device_logits();
  if (has_grammar_rows(work)) mask_argmax_rows(work, dl.view);
  work.argmax_slot = argmax_slot_;
  argmax_slot_ ^= 1;
  work.argmax_ids = batch_sampler_.queue_argmax(dl.view, dl.softcap, work.argmax_slot);
  std::lock_guard lock(mu_);
  ++stats_.n_top_k_calls;
  return work.argmax_slot;
}

std::optional<EngineLoop::Work> EngineLoop::plan_ahead(const Work& work) {
  if (!argmax_rows(work)) return std::nullopt;
  int32_t new_blocks = 0;
  for (const Live* l : work.rows) {
    if (l->shared->cancelled.load()) return std::nullopt;
    // The token this step gives must not end the request by count, and the one after it must
    // fit the context: only end of generation or a stop string may still end it.
    const auto n_tokens = static_cast<int32_t>(l->tokens.size());
    if (static_cast<int32_t>(l->result.tokens.size()) + 1 >= l->params.max_tokens || n_tokens + 1 > n_ctx_) {
      return std::nullopt;
    }
    if (n_tokens % cache_.block_size() == 0) ++new_blocks;
  }
  std::lock_guard lock(mu_);
  if (stopping_ || !jobs_.empty() || scheduler_.n_waiting() != 0 || scheduler_.n_running() != static_cast<int32_t>(work.rows.size()) ||
      new_blocks > scheduler_.n_free_blocks() || static_cast<int32_t>(work.rows.size()) > max_batch_tokens_) {
    return std::nullopt;
  }
  for (const Live* l : work.rows) scheduler_.append_token(l->shared->id);
  Work next;
  next.plan = scheduler_.schedule();
  // Every running request is a row of `work` and each has room: the plan is one token each, in
  // the same (running) order, nothing admitted or preempted.
  bool same = next.plan.preempted.empty() && next.plan.chunks.size() == work.rows.size();
  for (size_t i = 0; same && i < work.rows.size(); ++i) {
    const ScheduledChunk& c = next.plan.chunks[i];
    same = c.id == work.rows[i]->shared->id && c.n == 1 && c.output && !c.admitted;
  }
  CERA_CHECK_MSG(same, "engine loop: the step planned ahead is not one decode token per row of the last step");
  next.rows = work.rows;
  ++stats_.n_steps;
  ++stats_.n_steps_ahead;
  stats_.n_forward_tokens += next.plan.n_tokens();
  return next;
}

void EngineLoop::sample_rows(const Work& work) {
  sample_rows_.clear();
  // The masks are computed here, after the step's forward was issued: on a device that overlaps
  // the host (CUDA) this host work runs while the forward does.
  const auto mask_start = std::chrono::steady_clock::now();
  int64_t n_masked = 0;
  const size_t n_words = static_cast<size_t>((n_vocab_ + 31) / 32);
  for (size_t i = 0; i < work.rows.size(); ++i) {
    if (!work.plan.chunks[i].output) continue;
    Live& l = *work.rows[i];
    std::span<const uint32_t> allowed;
    if (l.matcher != nullptr) {
      l.mask.assign(n_words, 0u);
      l.matcher->fill_mask(l.mask);
      l.mask_empty = std::all_of(l.mask.begin(), l.mask.end(), [](uint32_t w) { return w == 0; });
      // An empty mask cannot be sampled from: the row draws unmasked and take_token ends it.
      if (!l.mask_empty) allowed = l.mask;
      ++n_masked;
    }
    sample_rows_.push_back({.sampler = &l.sampler,
                            .history = l.tokens,
                            .logit_bias = &l.params.logit_bias,
                            .logprobs = l.params.logprobs,
                            .top_logprobs = l.params.top_logprobs,
                            .allowed = allowed});
  }
  const double mask_seconds =
      n_masked > 0 ? std::chrono::duration<double>(std::chrono::steady_clock::now() - mask_start).count() : 0.0;
  const BatchSamplerStats before = batch_sampler_.stats();
  const model::Model::DeviceLogits dl = model_->device_logits();
  batch_sampler_.sample(dl.view, dl.softcap, sample_rows_, sampled_);
  const BatchSamplerStats& after = batch_sampler_.stats();
  std::lock_guard lock(mu_);
  stats_.n_sampled += static_cast<int64_t>(sample_rows_.size());
  stats_.n_masked_rows += n_masked;
  stats_.mask_seconds += mask_seconds;
  stats_.n_top_k_calls += after.n_top_k_calls - before.n_top_k_calls;
  stats_.n_rows_read_back += after.n_rows_read_back - before.n_rows_read_back;
}

Status EngineLoop::forward(Work& work, const TensorView* token_ids) {
  tokens_.clear();
  positions_.clear();
  token_seq_.clear();
  slots_.clear();
  ring_slots_.clear();
  outputs_.clear();
  checkpoints_.clear();
  const bool ring = cache_.ring_tokens() > 0;
  for (size_t i = 0; i < work.rows.size(); ++i) {
    const ScheduledChunk& c = work.plan.chunks[i];
    Live& l = *work.rows[i];
    // Admitted chunks' sequences were opened by schedule() (on their cached prefix, if any).
    CERA_CHECK(l.seq >= 0 && cache_.length(l.seq) == c.first);
    CERA_RETURN_IF_ERROR(cache_.append(l.seq, c.n, slots_));
    cache_.state_checkpoints(l.seq, c.n, static_cast<int32_t>(tokens_.size()), checkpoints_);
    CERA_CHECK(token_ids == nullptr || c.n == 1);
    for (int32_t t = c.first; t < c.first + c.n; ++t) {
      tokens_.push_back(token_ids != nullptr ? 0 : l.tokens[t]);  // with token_ids only the count is read
      positions_.push_back(t);
      token_seq_.push_back(static_cast<int32_t>(i));
      if (ring) ring_slots_.push_back(cache_.ring_slot(l.seq, t));
    }
    if (c.output) outputs_.push_back(static_cast<int32_t>(tokens_.size()) - 1);
  }
  {
    // The scheduler left exactly the blocks free that the cache has after the appends.
    std::lock_guard lock(mu_);
    CERA_CHECK_MSG(scheduler_.n_free_blocks() == cache_.n_free_blocks(),
                   "engine loop: the scheduler counts " + std::to_string(scheduler_.n_free_blocks()) +
                       " free KV blocks, the cache " + std::to_string(cache_.n_free_blocks()));
  }
  // Tables after every append: an append may grow a sequence's table.
  tables_.clear();
  ring_tables_.clear();
  table_offset_.assign(1, 0);
  ring_offset_.assign(1, 0);
  state_.clear();
  for (const Live* l : work.rows) {
    const auto table = cache_.block_table(l->seq), ring_table = cache_.ring_table(l->seq);
    tables_.insert(tables_.end(), table.begin(), table.end());
    table_offset_.push_back(static_cast<int32_t>(tables_.size()));
    ring_tables_.insert(ring_tables_.end(), ring_table.begin(), ring_table.end());
    ring_offset_.push_back(static_cast<int32_t>(ring_tables_.size()));
    const auto state = cache_.recurrent_state(l->seq);
    state_.insert(state_.end(), state.begin(), state.end());
  }
  const model::ForwardBatch batch{
      .tokens = tokens_,
      .token_ids = token_ids,
      .attention = {.positions = positions_, .token_seq = token_seq_, .block_tables = tables_, .table_offset = table_offset_},
      .kv_slots = slots_,
      .ring = ring ? model::RingTables{.block_tables = ring_tables_, .table_offset = ring_offset_, .kv_slots = ring_slots_}
                   : model::RingTables{},
      .output_rows = outputs_,
      .recurrent_state = state_,
      .state_checkpoints = checkpoints_};
  CERA_RETURN_IF_ERROR(model_->forward(batch, cache_.layers(), {}));  // the logits stay on the device
  // Only now are the blocks this forward completed trustworthy for other requests (a row's
  // token from token_ids is not known yet: its block is published by a later call).
  for (const Live* l : work.rows) cache_.publish_blocks(l->seq, l->tokens);
  return {};
}

int32_t EngineLoop::open_sequence(Live& l) {
  CERA_CHECK(l.seq < 0);
  // Without a prefix cache this is a plain new sequence (zeroed recurrent state: a recompute
  // starts from scratch); with one, the cached blocks and the state at their end.
  l.seq = cache_.new_sequence_from_prefix(l.tokens, l.params.cache_salt);
  const int32_t cached = cache_.length(l.seq);
  if (!l.admitted_before) l.result.n_cached_tokens = cached;
  l.admitted_before = true;
  if (cache_.has_prefix_cache()) {  // mu_ is held (schedule())
    ++stats_.n_prefix_queries;
    stats_.n_prefix_hits += cached > 0;
    stats_.n_prefix_query_tokens += static_cast<int64_t>(l.tokens.size());
    stats_.n_prompt_tokens_cached += cached;
  }
  return cached;
}

void EngineLoop::release_sequence(Live& l) {
  cache_.publish_blocks(l.seq, l.tokens);
  cache_.free_sequence(l.seq);
  l.seq = -1;
}

void EngineLoop::emit(Live& l, size_t n) {
  if (n == 0) return;
  const std::string_view out(l.held.data(), n);
  if (l.params.on_text) l.params.on_text(out);
  l.result.text.append(out);
  l.held.erase(0, n);
}

void EngineLoop::take_token(Live& l, SampledToken& sampled, bool counted) {
  const int32_t token = sampled.token;
  if (l.matcher != nullptr) {
    if (l.mask_empty || !l.matcher->accept_token(token)) {
      finish(l, FinishReason::kError,
             l.mask_empty ? invalid_argument("the grammar allows no token of this model's vocabulary after " +
                                             std::to_string(l.result.tokens.size()) + " generated tokens")
                          : Status(ErrorCode::kInternal,
                                   "engine loop: the grammar refused sampled token " + std::to_string(token)));
      return;
    }
    if (l.matcher->ended()) {  // an end-of-generation token where the grammar may end
      finish(l, FinishReason::kEndOfGeneration);
      return;
    }
  }
  if (l.params.stop_at_end_of_generation && tokenizer_.is_end_of_generation(token)) {
    finish(l, FinishReason::kEndOfGeneration);
    return;
  }
  l.tokens.push_back(token);
  l.result.tokens.push_back(token);
  if (l.result.tokens.size() == 1) l.first_token = std::chrono::steady_clock::now();
  if (l.params.on_token) l.params.on_token(token);
  if (sampled.logprobs) {
    if (l.params.on_logprobs) l.params.on_logprobs(*sampled.logprobs);
    l.result.logprobs.push_back(std::move(*sampled.logprobs));
  }
  if (l.matcher == nullptr && l.params.grammar.tables != nullptr) {
    const std::vector<int32_t>& triggers = l.params.grammar.trigger_tokens;
    if (std::find(triggers.begin(), triggers.end(), token) != triggers.end()) l.start_grammar();
  }
  l.decoder.push(token, l.held);
  bool stopped = false;
  for (const std::string& stop : l.params.stop) {  // the earliest match wins
    if (const size_t at = l.held.find(stop); !stop.empty() && at != std::string::npos) {
      l.held.resize(at);
      stopped = true;
    }
  }
  if (stopped) {
    emit(l, l.held.size());
    finish(l, FinishReason::kStopString);
    return;
  }
  emit(l, l.held.size() - held_suffix(l.held, l.params.stop));
  if (static_cast<int32_t>(l.result.tokens.size()) >= l.params.max_tokens) {
    finish(l, FinishReason::kMaxTokens);
    return;
  }
  if (static_cast<int32_t>(l.tokens.size()) > n_ctx_ && !shift_context(l)) {  // the token cannot be computed
    finish(l, FinishReason::kContextFull);
    return;
  }
  if (counted) return;
  std::lock_guard lock(mu_);
  scheduler_.append_token(l.shared->id);
}

bool EngineLoop::shift_context(Live& l) {
  const ContextShift& cs = l.params.context_shift;
  if (!cs.enabled || l.seq < 0) return false;
  // llama.cpp's rule (Session's for appends): keep the first n_keep, drop half of the rest.
  const int32_t len = cache_.length(l.seq);
  const int32_t keep = std::min(cs.n_keep, len - 1);
  const int32_t discard = std::max(1, (len - keep) / 2);
  if (!cache_.can_shift(l.seq, keep, discard)) return false;
  cache_.shift(l.seq, keep, discard);
  l.tokens.erase(l.tokens.begin() + keep, l.tokens.begin() + keep + discard);
  ++l.result.n_context_shifts;
  std::lock_guard lock(mu_);
  scheduler_.shift(l.shared->id, discard);
  ++stats_.n_context_shifts;
  return true;
}

void EngineLoop::finish(Live& l, FinishReason reason, Status status) {
  if (reason != FinishReason::kStopString) {
    l.decoder.finish(l.held);
    emit(l, l.held.size());
  }
  // With the row of a step queued ahead, if any. A failed forward's blocks are not published;
  // every other ending comes after successful forwards only.
  if (l.seq >= 0 && reason == FinishReason::kError) cache_.free_sequence(l.seq);
  if (l.seq >= 0 && reason != FinishReason::kError) release_sequence(l);
  l.seq = -1;
  if (ahead_) {
    for (Live*& row : ahead_->rows) {
      if (row != &l) continue;
      row = nullptr;
      std::lock_guard lock(mu_);
      ++stats_.n_rows_discarded;
    }
  }
  l.result.reason = reason;
  l.result.status = std::move(status);
  const auto now = std::chrono::steady_clock::now();
  if (!l.result.tokens.empty()) {
    l.result.seconds_to_first_token = std::chrono::duration<double>(l.first_token - l.submitted).count();
    l.result.seconds_generating = std::chrono::duration<double>(now - l.first_token).count();
  }
  l.result.context = std::move(l.tokens);
  const std::shared_ptr<detail::RequestShared> shared = l.shared;
  std::unique_ptr<Live> owned;  // keeps `l` alive until its result is published
  {
    std::lock_guard lock(mu_);
    scheduler_.remove(shared->id);
    auto it = live_.find(shared->id);
    CERA_CHECK(it != live_.end());
    owned = std::move(it->second);
    live_.erase(it);
    ++stats_.n_finished;
  }
  if (owned->params.on_finish) owned->params.on_finish(owned->result);
  {
    std::lock_guard lock(shared->mu);
    shared->result = std::move(l.result);
    shared->done = true;
  }
  shared->done_cv.notify_all();
}

}  // namespace cera::runtime
