#include "model/tensor_parallel.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "core/check.h"
#include "model/arch.h"
#include "model/blocks/output_head.h"
#include "model/hparams.h"

namespace cera::model {
namespace {

// A thread that runs one job at a time for a rank: a backend keeps its device (and CUDA its
// stream and graphs) bound to the thread that drives it, so a rank always runs on the same one.
class RankThread {
 public:
  RankThread() : thread_([this] { loop(); }) {}
  ~RankThread() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  RankThread(const RankThread&) = delete;
  RankThread& operator=(const RankThread&) = delete;

  void post(std::function<Status()> job) {
    {
      std::lock_guard lock(mutex_);
      job_ = std::move(job);
      result_.reset();
    }
    wake_.notify_all();
  }
  Status wait() {
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return result_.has_value(); });
    return *result_;
  }

 private:
  void loop() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [this] { return stop_ || job_ != nullptr; });
      if (stop_) return;
      std::function<Status()> job = std::move(job_);
      job_ = nullptr;
      lock.unlock();
      // A failed check inside a rank (a programming error) ends the process from here rather
      // than leave the other ranks waiting in a collective for one that will not come.
      Status st = job();
      lock.lock();
      result_ = std::move(st);
      done_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_, done_;
  std::function<Status()> job_;
  std::optional<Status> result_;
  bool stop_ = false;
  std::thread thread_;  // last: started once the members it uses exist
};

class TensorParallelModel final : public Model {
 public:
  TensorParallelModel(HParams whole, std::vector<std::unique_ptr<Model>> ranks,
                      std::vector<ops::Backend*> backends)
      : whole_(std::move(whole)), models_(std::move(ranks)), backends_(std::move(backends)) {
    for (const auto& m : models_) rank_ptrs_.push_back(m.get());
    for (size_t r = 1; r < models_.size(); ++r) threads_.push_back(std::make_unique<RankThread>());
  }

  const HParams& hparams() const override { return whole_; }
  // Rank 0's layout with every rank's K/V width summed: what the ranks together allocate per
  // token (KvCache allocates each rank's own through ranks()).
  KvGeometry kv_geometry() const override {
    KvGeometry g = models_[0]->kv_geometry();
    g.kv_width = 0;
    for (const auto& m : models_) g.kv_width += m->kv_geometry().kv_width;
    return g;
  }
  ops::RopeParams rope_params(int32_t il) const override { return models_[0]->rope_params(il); }
  ops::Backend& backend() override { return *backends_[0]; }
  bool causal() const override { return models_[0]->causal(); }
  DeviceLogits device_logits() const override { return models_[0]->device_logits(); }
  std::span<Model* const> ranks() const override { return rank_ptrs_; }

  Status forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv,
                 std::span<float> logits) override;

 private:
  HParams whole_;
  std::vector<std::unique_ptr<Model>> models_;
  std::vector<Model*> rank_ptrs_;
  std::vector<ops::Backend*> backends_;
  std::vector<std::unique_ptr<RankThread>> threads_;  // ranks 1..N-1; rank 0 runs on the caller's
};

Status TensorParallelModel::forward(const ForwardBatch& batch, std::span<const ops::KvLayer> kv,
                                    std::span<float> logits) {
  const size_t n_ranks = models_.size(), n_layer = static_cast<size_t>(whole_.n_layer);
  if (kv.size() != n_ranks * n_layer) {
    return invalid_argument("tensor parallel: the KV cache holds " + std::to_string(kv.size()) +
                            " layers, expected " + std::to_string(n_ranks) + " ranks x " +
                            std::to_string(n_layer));
  }
  // What a rank could refuse alone is checked here, for all: a rank that returned early would
  // leave the others waiting in their first collective.
  CERA_RETURN_IF_ERROR(check_output_buffer(batch, logits, whole_.n_vocab, whole_.n_embd));
  const size_t per_seq = n_ranks * n_layer;
  if (batch.recurrent_state.size() % per_seq != 0) {
    return invalid_argument("tensor parallel: recurrent state views are not " +
                            std::to_string(n_ranks) + " ranks x " + std::to_string(n_layer) +
                            " per sequence");
  }
  for (const StateCheckpoint& c : batch.state_checkpoints) {
    if (c.state.size() != per_seq)
      return invalid_argument("tensor parallel: a state checkpoint lacks a rank's views");
  }
  // Ids left on rank 0's device by the last step are read back once for all ranks: the
  // vocabulary-split embedding takes host ids (embed_batch).
  std::vector<int32_t> ids;
  if (batch.token_ids != nullptr) {
    ids.resize(batch.tokens.size());
    backends_[0]->download(ids.data(), *batch.token_ids);
  }
  const size_t n_seqs = batch.recurrent_state.size() / per_seq;
  std::vector<std::vector<TensorView>> states(n_ranks);
  std::vector<std::vector<StateCheckpoint>> checkpoints(n_ranks);
  std::vector<ForwardBatch> batches(n_ranks, batch);
  std::vector<std::vector<float>> hidden(n_ranks);  // ranks 1..: kHidden needs somewhere to write
  for (size_t r = 0; r < n_ranks; ++r) {
    for (size_t j = 0; j < n_seqs; ++j) {
      const auto views = batch.recurrent_state.subspan(j * per_seq + r * n_layer, n_layer);
      states[r].insert(states[r].end(), views.begin(), views.end());
    }
    for (const StateCheckpoint& c : batch.state_checkpoints) {
      checkpoints[r].push_back({.token = c.token, .state = c.state.subspan(r * n_layer, n_layer)});
    }
    ForwardBatch& b = batches[r];
    if (batch.token_ids != nullptr) {
      b.tokens = ids;
      b.token_ids = nullptr;
    }
    b.recurrent_state = states[r];
    b.state_checkpoints = checkpoints[r];
    if (r > 0 && batch.output == ForwardOutput::kHidden) hidden[r].resize(logits.size());
  }
  auto run = [&](size_t r) {
    const std::span<float> out = r == 0 ? logits : std::span<float>(hidden[r]);
    Status st = models_[r]->forward(batches[r], kv.subspan(r * n_layer, n_layer), out);
    // A device backend may hold the step's work in a log until it is read back; nobody reads
    // ranks 1.. back, so launch theirs (the collectives inside wait for every rank's).
    if (r > 0) backends_[r]->flush();
    return st;
  };
  for (size_t r = 1; r < n_ranks; ++r) threads_[r - 1]->post([&run, r] { return run(r); });
  Status first = run(0).with_context("tensor-parallel rank 0");
  for (size_t r = 1; r < n_ranks; ++r) {
    const Status st = threads_[r - 1]->wait();
    if (first.ok() && !st.ok())
      first = st.with_context("tensor-parallel rank " + std::to_string(r));
  }
  return first;
}

}  // namespace

Result<std::unique_ptr<Model>> load_tensor_parallel(const format::GgufFile& file,
                                                    const TensorParallelRanks& ranks,
                                                    const LoadOptions& options) {
  const int n = static_cast<int>(ranks.backends.size());
  if (n < 1 || ranks.collectives.size() != ranks.backends.size()) {
    return invalid_argument("tensor parallel: one backend and one collective per rank");
  }
  std::vector<std::unique_ptr<Model>> models;
  for (int r = 0; r < n; ++r) {
    LoadOptions o = options;
    o.shard = {.rank = r, .n_ranks = n};
    o.collective = ranks.collectives[static_cast<size_t>(r)];
    if (options.progress) {  // one bar over the ranks, which load one after another
      o.progress = [&options, r, n](uint64_t done, uint64_t total) {
        options.progress(uint64_t(r) * total + done, uint64_t(n) * total);
      };
    }
    auto m = load_model(file, *ranks.backends[static_cast<size_t>(r)], o);
    if (!m.ok())
      return m.status().with_context("tensor-parallel rank " + std::to_string(r) + " of " +
                                     std::to_string(n));
    models.push_back(std::move(m).value());
  }
  // The whole model's hyper-parameters: rank 0's with the counts shard_hparams divided restored.
  CERA_ASSIGN_OR_RETURN(const std::string name, file.get<std::string>("general.architecture"));
  const std::optional<Arch> arch = arch_from_name(name);
  CERA_CHECK(arch.has_value());  // load_model accepted it
  CERA_ASSIGN_OR_RETURN(const HParams file_hp, read_hparams(file, *arch));
  HParams whole = models[0]->hparams();
  whole.n_head = file_hp.n_head;
  whole.n_head_kv = file_hp.n_head_kv;
  whole.n_head_kv_layer = file_hp.n_head_kv_layer;
  whole.n_ff = file_hp.n_ff;
  whole.n_ff_exp = file_hp.n_ff_exp;
  return std::unique_ptr<Model>(
      std::make_unique<TensorParallelModel>(std::move(whole), std::move(models), ranks.backends));
}

}  // namespace cera::model
