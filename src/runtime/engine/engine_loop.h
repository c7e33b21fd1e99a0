// The engine loop: one thread that runs steps for every live request (schedule -> one
// ForwardBatch for all scheduled chunks -> Model::forward -> sample every output row -> update
// the requests -> stream their text). submit() from any thread. The one decision: the loop owns
// the KvCache and each request's sampler / decoder outright (only its thread touches them); the
// mutex guards just the Scheduler and the table of live requests, so a forward never holds it.
// The logits stay on the device: BatchSampler runs one top_k for the step's output rows and
// each request draws from its candidates (its whole row is read only when its chain needs it).
// A full context ends a request with kContextFull, or shifts it in place (RequestParams::context_shift).
// Overlap (EngineLoopOptions::pipeline): when every row of a step is a greedy decode that will
// surely go on (no logprobs, bias or penalties; not at its max_tokens or context; nothing waiting
// to be admitted), the next step is planned and queued before this step's tokens are read back,
// its embedding reading the ids that the device's argmax just wrote. A row whose token then ends
// it (end of generation, a stop string) is finished and its queued row discarded with its KV
// sequence; anything else that changes the batch (an arrival, a cancel, a sampled row) makes the
// next step a plain one. This is the pipelined decode of every front end, at every batch size.
// Sliding-window layers (gemma3) and recurrent layers (lfm2) are driven as Session's appends drive them:
// one append per sequence per forward of at most max_batch_tokens (the KvCache rings are sized
// for that, max_sequences = max_running), and a recurrent state per sequence, zeroed when a
// preempted request starts its recompute.
// Prefix cache (EngineLoopOptions::prefix_cache): a request is admitted on the longest cached
// prefix of its tokens (KvCache::new_sequence_from_prefix, from the scheduler's KvPoolView) and
// computes only the rest; the blocks each forward completes are published once it succeeded. A
// preempted request publishes what it computed and may resume from it. Sliding-window and
// recurrent layers resume exactly (KvCacheConfig::prefix_cache says how).
// Exclusive jobs (run_exclusive): other work on the model (embeddings) runs on the loop's thread
// between two steps, when no forward is in flight or queued ahead, so it never races a step for
// the model's scratch and needs no lock of its own; a pending job stops the overlap for a step.
// Grammars (RequestParams::grammar): rows with and without one share a step. Each constrained
// row's mask comes from its TokenMatcher on the loop's thread after the step's forward is issued
// (so on CUDA it overlaps the forward) and is applied on the device before top_k. Greedy grammar
// rows keep the overlapped decode: the next step's forward is queued first, then the host waits
// for this step's tokens, feeds them to the matchers, computes the next masks and queues them
// with the next argmax while that forward runs.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "runtime/decode_pipeline.h"
#include "runtime/engine/batch_sampler.h"
#include "runtime/engine/request.h"
#include "runtime/engine/scheduler.h"
#include "runtime/kv_cache.h"
#include "tokenizer/tokenizer.h"

namespace cera::runtime {

struct EngineLoopOptions {
  int32_t n_ctx = 0;               // tokens per request (prompt + output); 0: the model's training context
  // Tokens per step over all requests; at most the model's LoadOptions::max_batch_tokens (its
  // scratch), else every forward fails.
  int32_t max_batch_tokens = 512;
  int32_t max_running = 16;        // requests holding KV at once
  int32_t max_waiting = 256;       // bounded queue: submit() beyond it is an error
  int32_t kv_block_size = 16;
  int32_t kv_tokens = 0;           // the KV pool in tokens; 0: max_running * n_ctx. n_ctx is capped to it
  DType kv_type = DType::kF32;
  DecodePipeline pipeline = DecodePipeline::kAuto;  // see the header comment
  // Share full KV blocks between requests with the same prefix (header comment). For models with
  // sliding-window layers it stores those layers paged, at full length (KvCacheConfig).
  bool prefix_cache = true;
};

enum class ShutdownMode : uint8_t {
  kDrain,   // every submitted request runs to its end
  kCancel,  // every unfinished request ends with kCancelled at the next step
};

struct EngineLoopStats {
  int64_t n_steps = 0;
  int64_t n_forward_tokens = 0;   // tokens computed, recomputes included
  int64_t n_sampled = 0;          // output rows sampled
  int64_t n_preemptions = 0;
  int64_t n_finished = 0;
  int32_t max_rows_in_step = 0;   // most requests in one forward
  int64_t n_top_k_calls = 0;      // Backend::top_k calls: at most one per step, for all its rows
  int64_t n_rows_read_back = 0;   // output rows whose whole [n_vocab] logits were read to the host
  int64_t n_steps_ahead = 0;      // steps queued before the previous step's tokens were read back
  int64_t n_rows_discarded = 0;   // rows of such steps whose request ended on the token before
  int64_t n_context_shifts = 0;
  // Grammars: output rows sampled under a mask, and the host seconds spent computing the masks.
  int64_t n_masked_rows = 0;
  double mask_seconds = 0;
  // Prefix cache (0 without it): admissions (first and after preemption) that looked it up, those
  // that started on cached blocks, the tokens looked up and the tokens taken from it.
  int64_t n_prefix_queries = 0;
  int64_t n_prefix_hits = 0;
  int64_t n_prefix_query_tokens = 0;
  int64_t n_prompt_tokens_cached = 0;
  // Now: requests holding KV and queued; the pool's blocks and those free (blocks only the prefix
  // cache holds count as free: they are evicted on demand), as of the loop's last step.
  int32_t n_running = 0;
  int32_t n_waiting = 0;
  int32_t n_kv_blocks = 0;
  int32_t n_kv_blocks_free = 0;
};

class EngineLoop {
 public:
  // Starts the loop's thread. The model and tokenizer must outlive the loop; nothing else may
  // run the model while the loop lives (its scratch and logits are shared).
  static Result<std::unique_ptr<EngineLoop>> create(model::Model& model, const tokenizer::Tokenizer& tokenizer,
                                                    const EngineLoopOptions& options);
  ~EngineLoop();  // shutdown(kCancel)
  EngineLoop(const EngineLoop&) = delete;
  EngineLoop& operator=(const EngineLoop&) = delete;

  // Queues a request; any thread. Errors (nothing queued): an empty prompt or an id outside the
  // vocabulary, max_tokens < 0, a logit_bias id outside the vocabulary or a bias not finite (naming
  // the id), top_logprobs outside 0..kMaxTopLogprobs or without logprobs, a prompt longer than
  // n_ctx or the pool, a full queue (naming max_waiting), or a loop that is shutting down.
  Result<RequestHandle> submit(RequestParams params);
  // Queues every request of `batch` under one lock, so that the loop's next step sees them all
  // (a bench's "submitted at once", or the n choices of one API request), or none: submit()'s
  // errors, naming the request, and a queue without room for the whole batch.
  Result<std::vector<RequestHandle>> submit_all(std::vector<RequestParams> batch);
  // Stops accepting requests, drains or cancels what is left, and joins the thread. Idempotent;
  // any thread but the loop's own (not from a sink).
  void shutdown(ShutdownMode mode);

  // Runs `job` on the loop's thread between two steps (header comment) and returns once it has
  // run; it may use the model but not the loop. Any thread but the loop's own (not from a sink).
  // Error (job not run): the loop is shutting down.
  Status run_exclusive(const std::function<void()>& job);

  EngineLoopStats stats() const;
  int32_t n_ctx() const { return n_ctx_; }
  KvBytes kv_bytes() const { return cache_.bytes(); }  // fixed at create: any thread
  // After shutdown: the KvCache's bookkeeping is intact, no sequence is live, every block is free
  // and the scheduler's pool model agrees.
  Status check_pool_after_shutdown() const;

 private:
  struct Live;      // engine_loop.cpp
  class LoopPool;   // the scheduler's KvPoolView on cache_ (engine_loop.cpp)
  EngineLoop(model::Model& model, tokenizer::Tokenizer tokenizer, KvCache cache, BatchSampler sampler,
             const SchedulerConfig& sc, int32_t n_ctx, DecodePipeline pipeline);
  void run();
  struct Job;  // run_exclusive's
  // Runs the queued jobs (called with none in flight). `lock` holds mu_ and is released meanwhile.
  void run_jobs(std::unique_lock<std::mutex>& lock);
  Status validate(const RequestParams& params) const;  // submit()'s checks that need no lock
  // Under mu_, after scheduler_.can_add: gives the request its id and queues it (or ends it at
  // once when max_tokens is 0).
  RequestHandle enqueue_locked(std::unique_ptr<Live> live);
  // One step; false when the loop should exit.
  bool step();
  // What a step runs: chunk i of the plan belongs to rows[i] (nullptr: a row of a step queued
  // ahead whose request ended before the step's tokens were taken; its output is ignored).
  struct Work {
    StepPlan plan;
    std::vector<Live*> rows;
    std::vector<Live*> preempted;
    int argmax_slot = -1;    // >= 0: the argmax of its output rows is queued in this BatchSampler slot
    TensorView argmax_ids;   // [n_rows] I32 on the device, with argmax_slot
  };
  // Plans and runs a fresh step (false: nothing to run); a failed forward finishes its rows.
  bool start_step(Work& work);
  // The step after `work`, planned before work's tokens are known, when the overlap applies
  // (header comment): every row decodes the token work's output row gives it. Applied to the
  // scheduler as if those tokens were taken. nullopt: the next step must wait for the tokens.
  std::optional<Work> plan_ahead(const Work& work);
  bool pipelines() const;
  // Every row is an output row whose chain the device's argmax decides (greedy, no logprobs or bias).
  bool argmax_rows(const Work& work) const;
  // Queues the argmax of the last forward's output rows (work's) into the next slot, after the
  // masks of its grammar rows (mask_argmax_rows); returns the slot.
  int queue_argmax(Work& work);
  bool has_grammar_rows(const Work& work) const;
  // Computes the masks of work's rows with an active grammar and applies them to `logits`.
  void mask_argmax_rows(const Work& work, const TensorView& logits);
  // Forgets the step queued ahead (its rows all ended), redeeming its queued argmax.
  void drop_ahead();
  // Builds the ForwardBatch and runs it. token_ids: the batch's ids on the device (each chunk is
  // one token then), else they come from the requests' token lists.
  Status forward(Work& work, const TensorView* token_ids = nullptr);
  // Samples every output row of the forward (chunk order) into sampled_.
  void sample_rows(const Work& work);
  // Takes a row's sampled token: result, sinks, stop rules. `counted`: the scheduler already
  // counts the token (plan_ahead), else it is told now.
  void take_token(Live& l, SampledToken& sampled, bool counted = false);
  void emit(Live& l, size_t n);  // hands the first n held bytes to the sink
  // The request's context is full: a context shift when it asks for one and its cache allows
  // (RequestParams::context_shift); false: it cannot go on.
  bool shift_context(Live& l);
  // Ends a request: frees its KV sequence, removes it from the scheduler and the live table,
  // publishes the result. Not under mu_.
  void finish(Live& l, FinishReason reason, Status status = {});
  // Opens l's KV sequence on its cached prefix (LoopPool::open, under mu_); returns its length.
  int32_t open_sequence(Live& l);
  // Publishes l's computed blocks (all its forwards succeeded) and frees its KV sequence.
  void release_sequence(Live& l);

  model::Model* model_;
  tokenizer::Tokenizer tokenizer_;
  DecodePipeline pipeline_;
  KvCache cache_;  // loop thread only
  BatchSampler batch_sampler_;  // loop thread only
  int32_t n_ctx_;
  int32_t n_vocab_;
  int32_t max_batch_tokens_;

  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::unique_ptr<KvPoolView> pool_view_;                   // used by scheduler_ only
  Scheduler scheduler_;                                     // guarded by mu_
  std::unordered_map<RequestId, std::unique_ptr<Live>> live_;  // guarded by mu_ (entries: loop thread)
  RequestId next_id_ = 1;                                   // guarded by mu_
  bool stopping_ = false;                                   // guarded by mu_
  bool cancel_all_ = false;                                 // guarded by mu_
  std::deque<Job*> jobs_;                                   // guarded by mu_; run_exclusive's callers own them
  std::condition_variable job_done_;  // run_exclusive's callers wait on it (wake_ wakes the loop only)
  EngineLoopStats stats_;                                   // guarded by mu_
  std::mutex join_mu_;  // shutdown() from two threads joins once
  std::thread thread_;

  // Batch assembly buffers (ForwardBatch's layout), loop thread only.
  std::vector<int32_t> tokens_, positions_, token_seq_, slots_, ring_slots_;  // [n_tokens] each
  std::vector<int32_t> outputs_;                                             // [n_outputs] ascending
  std::vector<int32_t> tables_, ring_tables_;        // every row's block table, concatenated
  std::vector<int32_t> table_offset_, ring_offset_;  // [n_rows + 1]
  std::vector<TensorView> state_;                    // [n_rows * n_layer] recurrent state views
  std::vector<model::StateCheckpoint> checkpoints_;  // recurrent state wanted at block ends (prefix cache)
  std::vector<SampleRow> sample_rows_;               // [n_outputs]
  std::vector<SampledToken> sampled_;                // [n_outputs]
  std::vector<uint32_t> masks_;                      // mask_argmax_rows: the step's masks and rows
  std::vector<int32_t> mask_rows_;
  // The step queued ahead (plan_ahead): its forward is issued, its sampling is next. Loop thread.
  std::optional<Work> ahead_;
  int argmax_slot_ = 0;  // BatchSampler argmax slot of the next queue_argmax
};

}  // namespace cera::runtime
