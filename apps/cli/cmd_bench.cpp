// `cera bench`: prompt-processing and generation speed, llama-bench style: every test repeated
// -r times on a fresh context (after --depth tokens of history), reported as median, p10 and
// p90 tokens/s, with the share of memory bandwidth generation reaches: the bytes of weights one
// token reads (for a mixture of experts only the chosen experts' share of each expert stack) per
// second, against the measured host bandwidth or --roofline-gbs (a device's, e.g. 4300 for the
// H200 of PERFORMANCE.md). Generation runs as every front end generates: one request through
// the engine loop (a batch of one, pipelined on a device unless --no-pipeline); tg is timed from
// its first token to its last (n_gen forward passes), so the prompt that starts it is not
// counted. Prompt processing evaluates the prompt through a Session (no token is generated).
// With --concurrency N the serving bench runs instead (bench_concurrency.h): N requests at once.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

#include "arg_checks.h"
#include "bench_concurrency.h"
#include "decode_cost.h"
#include "membw.h"
#include "model_options.h"
#include "output.h"
#include "runtime/engine/engine_loop.h"

namespace cera::cli {
namespace {

// -p, -n and -d each: their sum (the context) stays far inside int32.
constexpr int64_t kMaxBenchTokens = int64_t{1} << 24;

struct BenchOptions {
  ModelOptions model;
  int n_prompt = 512;
  int n_gen = 128;
  int reps = 5;
  int depth = 0;
  bool membw = true;
  double roofline_gbs = 0;  // > 0: the bandwidth shares are reported against (no host measurement)
  bool pipeline = true;     // false: greedy decode reads each token back before queuing the next step
  ConcurrencyBenchOptions concurrent;  // concurrency > 0: the serving bench instead of the tests above
};

// --concurrency: far beyond any useful batch; a step computes at most -b (<= 65536) tokens, so
// more requests than that could never all decode in one step.
constexpr int64_t kMaxConcurrency = kMaxBatch;

struct Summary {
  double median, p10, p90;
};

Summary summarize(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    const double idx = q * (v.size() - 1);
    const size_t lo = static_cast<size_t>(idx);
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (v[hi] - v[lo]) * (idx - lo);
  };
  return {at(0.5), at(0.1), at(0.9)};
}

void bench(const BenchOptions& o) {
  if (o.concurrent.concurrency > 0) {
    ConcurrencyBenchOptions c = o.concurrent;
    c.reps = o.reps;
    c.roofline_gbs = o.roofline_gbs;
    bench_concurrency(o.model, c);
    return;
  }
  auto engine = load_engine_or_exit("bench", o.model);
  const int32_t n_vocab = engine->model().hparams().n_vocab;
  const int32_t ctx = o.depth + std::max(o.n_prompt, o.n_gen) + 1;
  auto session = new_session_or_exit(
      "bench", *engine,
      {.n_ctx = ctx,
       .n_batch = o.model.batch,
       .context_shift = false},
      "-d, -p or -n");
  // The generation's loop, beside the prompt's session: they take turns, never both at once.
  auto loop = runtime::EngineLoop::create(
      engine->model(), engine->tokenizer(),
      {.n_ctx = ctx,
       .max_batch_tokens = o.model.batch,
       .max_running = 1,
       .max_waiting = 1,
       .kv_tokens = ctx,
       .kv_type = engine->kv_type(),
       .pipeline = o.pipeline ? runtime::DecodePipeline::kAuto : runtime::DecodePipeline::kOff});
  if (!loop.ok()) fail("bench", loop.status());
  const format::GgufFile& f = engine->file();
  uint64_t params = 0;
  for (const auto& t : f.tensors()) params += t.n_elements();
  // The header first, flushed: a stdout that cannot be written stops the bench before it runs.
  stdout_print("model: {} ({}, {:.2f} GiB, {:.1f} M parameters)\nbackend: {}, kv cache {}\n", o.model.model,
               f.get_or<std::string>("general.name", "?").value_or("?"), f.file_size() / 1073741824.0, params / 1e6,
               engine->device_name(), dtype_name(engine->kv_type()));
  stdout_flush();
  fail_if_stdout_failed();
  std::mt19937 rng(42);
  auto random_tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (int32_t& x : t) x = static_cast<int32_t>(rng() % n_vocab);
    return t;
  };
  auto check = [](const Status& st) {
    if (!st.ok()) fail("bench", st);
  };
  using Clock = std::chrono::steady_clock;
  std::vector<double> pp, tg;
  for (int r = 0; r < o.reps + 1; ++r) {  // the first round warms caches and is discarded
    if (o.n_prompt > 0) {
      session->reset();
      if (o.depth > 0) check(session->append_tokens(random_tokens(o.depth)));
      const auto prompt = random_tokens(o.n_prompt);
      const auto t0 = Clock::now();
      check(session->append_tokens(prompt));
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (r > 0) pp.push_back(o.n_prompt / s);
    }
    if (o.n_gen > 0) {
      // Greedy generation as `cera run --temp 0` does it: each token picked on the backend (a
      // device reads back its id, not the logits). n_gen + 1 tokens: the first comes from the
      // prompt's forward, the n_gen after it from one decode step each.
      runtime::RequestParams req{.prompt = random_tokens(std::max(o.depth, 1)),
                                 .sampling = {.temperature = 0.0f},
                                 .max_tokens = o.n_gen + 1,
                                 .stop_at_end_of_generation = false};
      Clock::time_point first, last;
      int32_t n_seen = 0;
      req.on_token = [&](int32_t) {  // on the loop's thread; read after wait()
        last = Clock::now();
        if (n_seen++ == 0) first = last;
      };
      auto handle = (*loop)->submit(std::move(req));
      if (!handle.ok()) fail("bench", handle.status());
      const runtime::RequestResult& result = handle->wait();
      check(result.status);
      if (n_seen != o.n_gen + 1) {
        fail("bench", Status(ErrorCode::kInternal, fmt::format("generation ended after {} of {} tokens ({})", n_seen,
                                                               o.n_gen + 1, runtime::finish_reason_name(result.reason))));
      }
      const double s = std::chrono::duration<double>(last - first).count();
      if (r > 0) tg.push_back(o.n_gen / s);
    }
  }
  const model::HParams& hp = engine->model().hparams();
  const double gb_per_token = decode_cost(f, hp).weight_bytes / 1e9;
  const int threads = o.model.threads > 0 ? o.model.threads : static_cast<int>(std::thread::hardware_concurrency());
  const bool measure = o.membw && o.roofline_gbs <= 0;
  const double membw = o.roofline_gbs > 0 ? o.roofline_gbs : measure ? measure_read_bandwidth_gbs(threads) : 0.0;
  if (measure) stdout_print("measured memory read bandwidth: {:.1f} GB/s ({} threads)\n", membw, threads);
  if (o.roofline_gbs > 0) stdout_print("roofline: {:.1f} GB/s (--roofline-gbs)\n", membw);
  stdout_print("\n| {:<14} | {:>6} | {:>10} | {:>10} | {:>10} | {:>14} |\n", "test", "depth", "t/s median", "p10", "p90",
             "weights GB/s");
  stdout_print("|{:-<16}|{:->8}|{:->12}|{:->12}|{:->12}|{:->16}|\n", "", "", "", "", "", "");
  if (!pp.empty()) {
    const Summary s = summarize(pp);
    stdout_print("| {:<14} | {:>6} | {:>10.2f} | {:>10.2f} | {:>10.2f} | {:>14} |\n", fmt::format("pp{}", o.n_prompt),
               o.depth, s.median, s.p10, s.p90, "-");
  }
  if (!tg.empty()) {
    const Summary s = summarize(tg);
    const double gbs = s.median * gb_per_token;
    const std::string share = membw > 0 ? fmt::format("{:.1f} ({:.0f}%)", gbs, 100.0 * gbs / membw) : fmt::format("{:.1f}", gbs);
    stdout_print("| {:<14} | {:>6} | {:>10.2f} | {:>10.2f} | {:>10.2f} | {:>14} |\n", fmt::format("tg{}", o.n_gen),
               o.depth, s.median, s.p10, s.p90, share);
  }
  stdout_print("\n{} repetitions after one warm-up; tg reads {:.1f} MB of weights per token", o.reps, gb_per_token * 1e3);
  if (hp.n_expert > 0) stdout_print(" ({} of {} experts per layer)", hp.n_expert_used, hp.n_expert);
  stdout_print("\n");
  fail_if_stdout_failed();  // main's final flush catches what is still buffered
}

}  // namespace

void register_bench(CLI::App& app) {
  auto* cmd = app.add_subcommand("bench", "Measure prompt and generation speed");
  auto o = std::make_shared<BenchOptions>();
  add_model_options(cmd, o->model);
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt tokens (0: skip)")
      ->check(int_range(0, kMaxBenchTokens, "0: skip"));
  cmd->add_option("-n,--n-gen", o->n_gen, "generated tokens (0: skip)")->check(int_range(0, kMaxBenchTokens, "0: skip"));
  cmd->add_option("-r,--repetitions", o->reps, "repetitions")->check(int_range(1, 100000));
  cmd->add_option("-d,--depth", o->depth, "tokens already in the context")->check(int_range(0, kMaxBenchTokens));
  cmd->add_flag("!--no-membw", o->membw, "skip measuring memory bandwidth");
  cmd->add_flag("!--no-pipeline", o->pipeline,
                "generation reads each token back before queuing the next step (A/B of the pipelined decode)");
  cmd->add_option("--roofline-gbs", o->roofline_gbs,
                  "memory bandwidth (GB/s) to report the share of, instead of measuring the host's (e.g. 4300: H200); "
                  "with --concurrency, of the decode step's ceiling")
      ->check(real_range({.lo = 0, .hi = 1e6}, "0: measure the host's"));
  // The serving bench (bench_concurrency.h); its options need --concurrency, and the
  // single-sequence tests' own options are refused beside it rather than silently ignored.
  ConcurrencyBenchOptions& c = o->concurrent;
  auto* concurrency =
      cmd->add_option("--concurrency", c.concurrency,
                      "N requests at once through the engine loop: aggregate tokens/s, TTFT, inter-token latency")
          ->check(int_range(1, kMaxConcurrency));
  const auto needs_concurrency = [&](CLI::Option* opt) { opt->needs(concurrency); };
  needs_concurrency(cmd->add_option("--prompt", c.n_prompt, "--concurrency: prompt tokens a request")
                        ->check(int_range(1, kMaxBenchTokens)));
  needs_concurrency(cmd->add_option("--gen", c.n_gen, "--concurrency: generated tokens a request")
                        ->check(int_range(1, kMaxBenchTokens)));
  needs_concurrency(cmd->add_option("--shared-prefix", c.shared_prefix,
                                    "--concurrency: leading prompt tokens common to every request (at most --prompt)")
                        ->check(int_range(0, kMaxBenchTokens)));
  needs_concurrency(cmd->add_option("--roofline-tflops", c.roofline_tflops,
                                    "--concurrency: matrix throughput (TFLOP/s) of the decode step's ceiling beside "
                                    "--roofline-gbs (e.g. 790: H200 f16)")
                        ->check(real_range({.lo = 0, .hi = 1e6}, "0: bytes only")));
  needs_concurrency(cmd->add_option("--kv-tokens", c.kv_tokens,
                                    "--concurrency: KV pool in tokens (0: enough for every request; smaller: preemption)")
                        ->check(int_range(0, kInt32Max, "0: concurrency x (prompt + gen)")));
  add_grammar_options(cmd, c.grammar);
  needs_concurrency(cmd->get_option("--grammar"));
  needs_concurrency(cmd->get_option("--json-schema"));
  for (const char* single : {"--n-prompt", "--n-gen", "--depth", "--no-pipeline", "--no-membw"})
    concurrency->excludes(cmd->get_option(single));
  cmd->callback([o] { bench(*o); });
}

}  // namespace cera::cli
