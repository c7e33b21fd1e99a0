// One step, in order: (1) running requests oldest first each get min(n_tokens - n_computed,
// budget left) tokens, shrunk to the free blocks, and when not even one token fits, the youngest
// running request is preempted (possibly the one being planned, which then waits); (2) only if
// nothing was preempted, waiting requests are admitted strictly FCFS while the whole of their
// known tokens fits the free blocks (a head that does not fit blocks the queue: no overtaking).
// A cached prefix needs no new blocks but takes its unreferenced blocks out of the available
// ones; the request starts computing after it.
#include "runtime/engine/scheduler.h"

#include <algorithm>
#include <string>

#include "core/check.h"

namespace cera::runtime {

Scheduler::Scheduler(const SchedulerConfig& config, KvPoolView* pool)
    : config_(config), pool_(pool), n_free_(config.n_blocks) {
  CERA_CHECK(config.max_batch_tokens > 0 && config.max_running > 0 && config.max_waiting > 0 && config.block_size > 0 &&
             config.n_blocks > 0 && config.n_ctx > 0);
  CERA_CHECK(int64_t{config.n_ctx} <= int64_t{config.n_blocks} * config.block_size);
}

Status Scheduler::add(RequestId id, int32_t n_prompt) {
  CERA_CHECK(n_prompt > 0);
  CERA_RETURN_IF_ERROR(can_add({n_prompt}));
  waiting_.push_back({.id = id, .n_tokens = n_prompt, .state = RequestState::kWaiting});
  return {};
}

Status Scheduler::can_add(const std::vector<int32_t>& n_prompts) const {
  const auto n = static_cast<int64_t>(n_prompts.size());
  if (n_waiting() + n > config_.max_waiting) {
    if (n == 1) {
      return unavailable("the waiting queue is full: " + std::to_string(config_.max_waiting) +
                         " requests wait already (max_waiting)");
    }
    return unavailable("the waiting queue holds " + std::to_string(n_waiting()) + " of at most " +
                       std::to_string(config_.max_waiting) + " requests (max_waiting): no room for " +
                       std::to_string(n) + " more");
  }
  auto fits = [&](int32_t n_prompt) -> Status {
    if (n_prompt > config_.n_ctx) {
      return out_of_range("the prompt is " + std::to_string(n_prompt) + " tokens, longer than the context of " +
                          std::to_string(config_.n_ctx) + " tokens per request");
    }
    if (blocks_for(n_prompt, config_.block_size) > config_.n_blocks) {
      return out_of_range("the prompt is " + std::to_string(n_prompt) + " tokens, more than the KV pool of " +
                          std::to_string(config_.n_blocks) + " blocks of " + std::to_string(config_.block_size) +
                          " tokens holds");
    }
    return {};
  };
  for (size_t i = 0; i < n_prompts.size(); ++i) {
    Status s = fits(n_prompts[i]);
    if (!s.ok()) return n == 1 ? s : s.with_context("request " + std::to_string(i + 1) + " of " + std::to_string(n));
  }
  return {};
}

void Scheduler::preempt_youngest(StepPlan& plan, int32_t& avail) {
  Entry e = running_.back();
  running_.pop_back();
  if (pool_ != nullptr) {
    const int32_t before = pool_->n_available_blocks();
    pool_->release(e.id);  // shared blocks stay with their other holders
    avail += pool_->n_available_blocks() - before;
  } else {
    avail += e.n_blocks;
  }
  e.n_blocks = 0;
  e.n_computed = 0;  // recomputed from its prompt + output so far
  e.state = RequestState::kPreempted;
  plan.preempted.push_back(e.id);
  waiting_.push_front(e);
  ++n_preemptions_;
}

StepPlan Scheduler::schedule() {
  StepPlan plan;
  int32_t avail = pool_ != nullptr ? pool_->n_available_blocks() : n_free_;
  int32_t budget = config_.max_batch_tokens;
  const int32_t bs = config_.block_size;
  for (size_t i = 0; i < running_.size() && budget > 0; ++i) {
    Entry& e = running_[i];
    CERA_CHECK(e.n_tokens > e.n_computed);  // a running request always has something to compute
    int32_t n = std::min(e.n_tokens - e.n_computed, budget);
    bool preempted_self = false;
    for (;;) {
      const int32_t fit = (e.n_blocks + avail) * bs - e.n_computed;  // tokens the free blocks take
      if (fit >= 1) {
        n = std::min(n, fit);
        break;
      }
      const bool self = i + 1 == running_.size();
      preempt_youngest(plan, avail);
      if (self) {
        preempted_self = true;
        break;
      }
    }
    if (preempted_self) break;  // it was the last running request
    const int32_t blocks = blocks_for(e.n_computed + n, bs) - e.n_blocks;
    avail -= blocks;
    e.n_blocks += blocks;
    plan.chunks.push_back({.id = e.id, .first = e.n_computed, .n = n, .output = e.n_computed + n == e.n_tokens});
    e.n_computed += n;
    budget -= n;
  }
  // Admission stops at the first preemption of the step: the pool is short already.
  while (plan.preempted.empty() && budget > 0 && !waiting_.empty() && n_running() < config_.max_running) {
    Entry& head = waiting_.front();
    const KvPoolView::Prefix prefix = pool_ != nullptr ? pool_->cached_prefix(head.id) : KvPoolView::Prefix{};
    CERA_CHECK(prefix.n_tokens < head.n_tokens && prefix.n_tokens == prefix.n_blocks * bs);
    if (blocks_for(head.n_tokens, bs) - prefix.n_blocks + prefix.n_unreferenced > avail) break;
    Entry e = head;
    waiting_.pop_front();
    if (pool_ != nullptr) {
      const int32_t before = pool_->n_available_blocks();
      CERA_CHECK(pool_->open(e.id) == prefix.n_tokens);
      avail += pool_->n_available_blocks() - before;  // -n_unreferenced
    }
    const int32_t n = std::min(e.n_tokens - prefix.n_tokens, budget);
    e.n_blocks = blocks_for(prefix.n_tokens + n, bs);
    avail -= e.n_blocks - prefix.n_blocks;
    e.state = RequestState::kRunning;
    plan.chunks.push_back({.id = e.id, .first = prefix.n_tokens, .n = n, .output = prefix.n_tokens + n == e.n_tokens,
                           .admitted = true});
    e.n_computed = prefix.n_tokens + n;
    budget -= n;
    running_.push_back(e);
  }
  n_free_ = avail;
  return plan;
}

void Scheduler::append_token(RequestId id) {
  auto it = std::find_if(running_.begin(), running_.end(), [id](const Entry& e) { return e.id == id; });
  CERA_CHECK(it != running_.end() && it->n_computed == it->n_tokens);
  ++it->n_tokens;
}

void Scheduler::shift(RequestId id, int32_t n_discard) {
  auto it = std::find_if(running_.begin(), running_.end(), [id](const Entry& e) { return e.id == id; });
  CERA_CHECK(it != running_.end() && it->n_computed == it->n_tokens && n_discard > 0 && n_discard < it->n_computed);
  it->n_tokens -= n_discard;
  it->n_computed -= n_discard;
  const int32_t blocks = blocks_for(it->n_computed, config_.block_size);
  if (pool_ == nullptr) n_free_ += it->n_blocks - blocks;  // with a pool view the next schedule() asks it
  it->n_blocks = blocks;
}

bool Scheduler::remove(RequestId id) {
  auto r = std::find_if(running_.begin(), running_.end(), [id](const Entry& e) { return e.id == id; });
  if (r != running_.end()) {
    if (pool_ == nullptr) n_free_ += r->n_blocks;  // with a pool view the next schedule() asks it
    running_.erase(r);
    return true;
  }
  auto w = std::find_if(waiting_.begin(), waiting_.end(), [id](const Entry& e) { return e.id == id; });
  if (w == waiting_.end()) return false;
  waiting_.erase(w);
  return true;
}

const Scheduler::Entry* Scheduler::find(RequestId id) const {
  for (const Entry& e : running_) {
    if (e.id == id) return &e;
  }
  for (const Entry& e : waiting_) {
    if (e.id == id) return &e;
  }
  return nullptr;
}

RequestState Scheduler::state(RequestId id) const {
  const Entry* e = find(id);
  return e ? e->state : RequestState::kFinished;
}

Scheduler::Counts Scheduler::counts(RequestId id) const {
  const Entry* e = find(id);
  return e ? Counts{e->n_computed, e->n_tokens, e->n_blocks} : Counts{};
}

Status Scheduler::check_integrity() const {
  int64_t held = 0;
  for (const Entry& e : running_) {
    if (e.n_blocks != blocks_for(e.n_computed, config_.block_size) || e.n_computed > e.n_tokens) {
      return Status(ErrorCode::kInternal, "scheduler: request " + std::to_string(e.id) + " holds " +
                                              std::to_string(e.n_blocks) + " blocks for " +
                                              std::to_string(e.n_computed) + " computed tokens");
    }
    held += e.n_blocks;
  }
  for (const Entry& e : waiting_) {
    if (e.n_blocks != 0 || e.n_computed != 0) {
      return Status(ErrorCode::kInternal, "scheduler: waiting request " + std::to_string(e.id) + " holds KV");
    }
  }
  const bool counts_agree = pool_ != nullptr ? n_free_ <= config_.n_blocks : held + n_free_ == config_.n_blocks;
  if (!counts_agree || n_free_ < 0) {
    return Status(ErrorCode::kInternal, "scheduler: " + std::to_string(held) + " blocks held + " +
                                            std::to_string(n_free_) + " free != " + std::to_string(config_.n_blocks));
  }
  return {};
}

}  // namespace cera::runtime
