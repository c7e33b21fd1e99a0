// The step planner (SERVING.md's "one idea"): every request has n_computed (tokens whose K/V are
// in the cache) and n_tokens (prompt + output so far); each step hands out a token budget so that
// n_computed catches up with n_tokens, oldest running request first, then admits waiting ones
// FCFS. The non-obvious decision: with blocks shared between requests (the prefix cache) the
// pool cannot be modelled from per-request counts, so the scheduler asks the pool itself
// (KvPoolView): how many blocks are available at the start of a step, how long a waiting
// request's cached prefix is; and it makes the pool act at once where the count depends on the
// act (admission takes the prefix's references, preemption frees the request's sequence). Only
// the step's appends are planned ahead, and the engine loop checks after them that the cache
// has exactly the blocks the scheduler left free. Without a pool view it models a pool without
// sharing itself (blocks held = ceil(n_computed / block_size)), for tests and tools.
// Not thread-safe: the engine loop calls it under its mutex.
#pragma once

#include <cstdint>
#include <deque>
#include <span>
#include <vector>

#include "core/status.h"
#include "runtime/engine/request.h"

namespace cera::runtime {

struct SchedulerConfig {
  int32_t max_batch_tokens = 512;  // tokens per step (one forward), over all requests
  int32_t max_running = 16;        // requests holding KV at once (KvCache max_sequences)
  int32_t max_waiting = 256;       // queued requests (waiting + preempted); add() beyond is an error
  int32_t block_size = 16;         // KV block size in tokens
  int32_t n_blocks = 0;            // the KV pool
  int32_t n_ctx = 0;               // most tokens one request may hold (prompt + output)
};

// The KV pool as the scheduler sees it when blocks may be shared. Called only from schedule(),
// on its thread; ids are the scheduler's running or waiting requests.
class KvPoolView {
 public:
  struct Prefix {
    int32_t n_tokens = 0;        // cached tokens the request would start with (whole blocks, < its tokens)
    int32_t n_blocks = 0;        // blocks holding them
    int32_t n_unreferenced = 0;  // of those, blocks no request holds (available until taken)
  };
  virtual ~KvPoolView() = default;
  // Blocks appends can take now (free, or cached and unreferenced).
  virtual int32_t n_available_blocks() const = 0;
  // The longest cached prefix of a waiting request's tokens. Changes nothing.
  virtual Prefix cached_prefix(RequestId id) const = 0;
  // Admits the request: opens its KV sequence on that prefix (taking its references). Returns
  // the tokens it starts with (the cached_prefix just asked).
  virtual int32_t open(RequestId id) = 0;
  // Preempts a running request: its KV sequence is freed now (cached blocks stay cached).
  virtual void release(RequestId id) = 0;
};

// One request's share of a step: tokens [first, first + n) of its token list are computed.
struct ScheduledChunk {
  RequestId id = 0;
  int32_t first = 0;  // == n_computed before the step (the position of the first token)
  int32_t n = 0;
  bool output = false;  // the chunk reaches n_tokens: its last row's logits give the next token
  // First chunk since (re)admission. With a pool view the sequence is open already (its first
  // `first` tokens from the prefix cache); without one the engine opens it (first == 0).
  bool admitted = false;
};

struct StepPlan {
  std::vector<ScheduledChunk> chunks;  // running order (oldest first); each request at most once
  // Requests whose KV was freed this step (youngest first); they are back at the front of the
  // waiting queue and will be recomputed from n_computed = 0.
  std::vector<RequestId> preempted;
  int32_t n_tokens() const {
    int32_t s = 0;
    for (const ScheduledChunk& c : chunks) s += c.n;
    return s;
  }
};

class Scheduler {
 public:
  // Precondition (checked): every field > 0 and n_ctx <= n_blocks * block_size, so that a
  // request alone always fits the pool (else a preempted one could wait forever). `pool`: see
  // the header comment; it must outlive the scheduler; nullptr: the scheduler's own model.
  explicit Scheduler(const SchedulerConfig& config, KvPoolView* pool = nullptr);

  // Queues a request with n_prompt tokens (> 0). Errors, naming the limit: the waiting queue is
  // full, or the prompt can never run (longer than n_ctx, or more blocks than the whole pool).
  Status add(RequestId id, int32_t n_prompt);
  // add()'s errors for n requests with these prompt lengths, without queueing any: so that a
  // batch is queued whole or not at all (EngineLoop::submit_all).
  Status can_add(const std::vector<int32_t>& n_prompts) const;
  // Plans one step and applies it to the bookkeeping: n_computed advances by each chunk as if
  // the forward succeeded (the engine finishes every request of a failed step).
  StepPlan schedule();
  // A token was sampled for a running request whose n_computed caught up: n_tokens grows by one.
  void append_token(RequestId id);
  // A context shift dropped n_discard of a running request's computed tokens (KvCache::shift, its
  // n_computed == n_tokens): both counts shrink by it, and so do its blocks.
  void shift(RequestId id, int32_t n_discard);
  // The request leaves (finished or cancelled), from whichever queue holds it; its blocks return.
  // Returns false when the id is unknown.
  bool remove(RequestId id);

  // Blocks left free by the last schedule() (with a pool view: as the pool will have them once
  // the step's appends are done; finishes since then are not counted).
  int32_t n_free_blocks() const { return n_free_; }
  int32_t n_running() const { return static_cast<int32_t>(running_.size()); }
  int32_t n_waiting() const { return static_cast<int32_t>(waiting_.size()); }
  bool idle() const { return running_.empty() && waiting_.empty(); }
  int64_t n_preemptions() const { return n_preemptions_; }
  // Where a request stands (kFinished for an unknown id) and its counters.
  RequestState state(RequestId id) const;
  struct Counts {
    int32_t n_computed = 0;
    int32_t n_tokens = 0;
    int32_t n_blocks = 0;
  };
  Counts counts(RequestId id) const;
  // The pool model is consistent: blocks held == ceil(n_computed / block_size) for every running
  // request, waiting ones hold none, and without a pool view held + free == n_blocks (with one,
  // shared blocks count once per holder: free <= n_blocks). For tests and the engine's checks.
  Status check_integrity() const;

  static int32_t blocks_for(int32_t n_tokens, int32_t block_size) { return (n_tokens + block_size - 1) / block_size; }

 private:
  struct Entry {
    RequestId id = 0;
    int32_t n_tokens = 0;
    int32_t n_computed = 0;
    int32_t n_blocks = 0;
    RequestState state = RequestState::kWaiting;
  };
  // Frees the youngest running request's blocks into `avail`.
  void preempt_youngest(StepPlan& plan, int32_t& avail);
  const Entry* find(RequestId id) const;

  SchedulerConfig config_;
  KvPoolView* pool_ = nullptr;
  int32_t n_free_ = 0;
  std::vector<Entry> running_;  // admission order: the youngest is at the back
  std::deque<Entry> waiting_;   // FCFS; preempted requests go back to the front
  int64_t n_preemptions_ = 0;
};

}  // namespace cera::runtime
