// `cera bench --concurrency N`: one engine loop for the whole bench; each run submits N requests
// at once and waits for all of them. Beyond the client-side latencies, the token callbacks' order
// shows each step's rows: the gap between two rows of one step is host work only (a step's
// forward ends before its first row is handed out): the row's text decoding and bookkeeping, and
// its sampling where the loop samples row by row (since BatchSampler the loop samples every row
// before handing any out, so that cost sits in the step instead). The bench prints that split.
// The prefix cache's share is counted by the loop (EngineLoopStats): tokens taken from the cache
// over tokens looked up at admission (vLLM's prefix-cache hit rate), per run. The decode steady
// state is then set against its ceiling (print_decode_ceiling): bytes and FLOPs a step, and with
// --roofline-gbs / --roofline-tflops the share of the ceiling reached.
#include "bench_concurrency.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <string>
#include <vector>

#include "arg_checks.h"
#include "decode_cost.h"
#include "output.h"
#include "text_input.h"
#include "runtime/engine/engine_loop.h"

namespace cera::cli {
namespace {

using Clock = std::chrono::steady_clock;

constexpr int32_t kBlockSize = 16;  // EngineLoopOptions' default KV block

// One request's times: submit on the main thread before submit(), tokens on the loop's thread in
// its token sink; read after wait() (the loop publishes the result after the last sink call).
struct RequestTimes {
  Clock::time_point submit;
  std::vector<Clock::time_point> tokens;  // [n_gen] when each token was handed out
};

// One token handed out, in the loop's order (loop thread only during a run).
struct TokenEvent {
  Clock::time_point at;
  int32_t request = 0;
};

struct Workload {
  int32_t n_requests, n_prompt, n_gen, shared_prefix, n_vocab;
  std::shared_ptr<const runtime::grammar::TokenTables> grammar;  // null: free
};

struct RunResult {
  int64_t n_generated = 0;
  double output_tps = 0;  // generated tokens / (first submit -> last token)
  double prompt_tps = 0;  // prompt tokens / (first submit -> the last request's first token)
  double ttft_p50 = 0, ttft_p99 = 0, itl_p50 = 0, itl_p99 = 0, e2e_p50 = 0, e2e_p99 = 0;  // ms
  int64_t preemptions = 0, steps = 0, forward_tokens = 0;
  // Prefix cache: prompt tokens taken from it, tokens looked up (admissions, re-admissions after
  // preemption too), admissions that hit and admissions.
  int64_t cached_tokens = 0, query_tokens = 0, hits = 0, queries = 0;
  int64_t masked_rows = 0;  // rows sampled under a grammar's mask, and the host time of the masks
  double mask_ms = 0;
  double hit_rate() const { return query_tokens > 0 ? 100.0 * static_cast<double>(cached_tokens) / query_tokens : 0.0; }
  // Steps in which every request had one row (the decode steady state).
  int64_t full_steps = 0;
  int64_t timed_steps = 0;  // full steps followed by a full step: those step_ms is taken over
  double step_ms = 0;     // median time from a full step's first row to the next full step's first row
  double row_gap_ms = 0;  // median gap between consecutive rows of one full step (0 when N = 1)
};

// Linear interpolation between the closest ranks (as the single-sequence bench's summary).
double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double idx = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<size_t>(idx);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

double ms(Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Splits the run's token order into steps (a step holds each request at most once and lists them
// in the same running order, so a request seen again starts the next step) and times the steps
// in which all n requests had a row.
void profile_steps(const std::vector<TokenEvent>& events, int32_t n, RunResult& r) {
  std::vector<std::pair<size_t, size_t>> steps;  // [begin, end) into events
  std::vector<int64_t> seen_in(static_cast<size_t>(n), -1);
  for (size_t i = 0; i < events.size(); ++i) {
    const auto req = static_cast<size_t>(events[i].request);
    if (steps.empty() || seen_in[req] == static_cast<int64_t>(steps.size()) - 1) steps.emplace_back(i, i);
    seen_in[req] = static_cast<int64_t>(steps.size()) - 1;
    steps.back().second = i + 1;
  }
  std::vector<double> periods, gaps;
  for (size_t s = 0; s < steps.size(); ++s) {
    const auto [b, e] = steps[s];
    if (e - b != static_cast<size_t>(n)) continue;
    ++r.full_steps;
    for (size_t i = b + 1; i < e; ++i) gaps.push_back(ms(events[i].at - events[i - 1].at));
    if (s + 1 < steps.size() && steps[s + 1].second - steps[s + 1].first == static_cast<size_t>(n))
      periods.push_back(ms(events[steps[s + 1].first].at - events[b].at));
  }
  r.timed_steps = static_cast<int64_t>(periods.size());
  r.step_ms = percentile(periods, 0.5);
  r.row_gap_ms = percentile(gaps, 0.5);
}

// Fresh random prompts each run (the shared prefix too), so that the prefix cache cannot reuse
// one run's blocks in the next: a run's hits are its own requests sharing its prefix. Ids from
// the fixed-seed generator the caller owns.
RunResult run_once(runtime::EngineLoop& loop, std::mt19937& rng, const Workload& w) {
  auto random_ids = [&](int32_t n, std::vector<int32_t>& out) {
    for (int32_t i = 0; i < n; ++i) out.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(w.n_vocab)));
  };
  std::vector<int32_t> prefix;
  random_ids(w.shared_prefix, prefix);
  std::vector<runtime::RequestParams> params(static_cast<size_t>(w.n_requests));
  for (runtime::RequestParams& p : params) {
    p.prompt = prefix;
    random_ids(w.n_prompt - w.shared_prefix, p.prompt);
    p.sampling = {.temperature = 0.0f};
    p.max_tokens = w.n_gen;
    p.stop_at_end_of_generation = false;  // exactly n_gen tokens each
    p.grammar.tables = w.grammar;
  }
  std::vector<RequestTimes> times(params.size());
  std::vector<TokenEvent> events;
  events.reserve(params.size() * static_cast<size_t>(w.n_gen));  // no allocation inside the sinks
  for (size_t i = 0; i < params.size(); ++i) {
    times[i].tokens.reserve(static_cast<size_t>(w.n_gen));
    params[i].on_token = [t = &times[i], &events, i](int32_t) {
      const Clock::time_point now = Clock::now();
      t->tokens.push_back(now);
      events.push_back({now, static_cast<int32_t>(i)});
    };
  }
  const runtime::EngineLoopStats before = loop.stats();
  // All at once, under one lock: the loop's next step sees every request, whatever the speed of
  // this thread against the loop's steps.
  const Clock::time_point t0 = Clock::now();
  for (RequestTimes& t : times) t.submit = t0;
  auto submitted = loop.submit_all(std::move(params));
  if (!submitted.ok()) fail("bench", submitted.status().with_context(fmt::format("submitting {} requests", times.size())));
  const std::vector<runtime::RequestHandle>& handles = *submitted;
  RunResult r;
  for (size_t i = 0; i < handles.size(); ++i) {
    const runtime::RequestResult& res = handles[i].wait();
    if (!res.status.ok()) fail("bench", res.status.with_context(fmt::format("request {}", i + 1)));
    if (static_cast<int32_t>(res.tokens.size()) != w.n_gen || times[i].tokens.size() != res.tokens.size()) {
      fail("bench", Status(ErrorCode::kInternal,
                           fmt::format("request {} ended ({}) after {} of its {} tokens", i + 1,
                                       runtime::finish_reason_name(res.reason), res.tokens.size(), w.n_gen)));
    }
    r.n_generated += static_cast<int64_t>(res.tokens.size());
  }
  const runtime::EngineLoopStats after = loop.stats();
  std::vector<double> ttft, itl, e2e;
  Clock::time_point last_token = t0, last_first = t0;
  for (const RequestTimes& t : times) {
    ttft.push_back(ms(t.tokens.front() - t.submit));
    e2e.push_back(ms(t.tokens.back() - t.submit));
    for (size_t k = 1; k < t.tokens.size(); ++k) itl.push_back(ms(t.tokens[k] - t.tokens[k - 1]));
    last_token = std::max(last_token, t.tokens.back());
    last_first = std::max(last_first, t.tokens.front());
  }
  r.output_tps = static_cast<double>(r.n_generated) / std::chrono::duration<double>(last_token - t0).count();
  r.prompt_tps = static_cast<double>(int64_t{w.n_requests} * w.n_prompt) /
                 std::chrono::duration<double>(last_first - t0).count();
  r.ttft_p50 = percentile(ttft, 0.5);
  r.ttft_p99 = percentile(ttft, 0.99);
  r.itl_p50 = percentile(itl, 0.5);
  r.itl_p99 = percentile(itl, 0.99);
  r.e2e_p50 = percentile(e2e, 0.5);
  r.e2e_p99 = percentile(e2e, 0.99);
  r.preemptions = after.n_preemptions - before.n_preemptions;
  r.steps = after.n_steps - before.n_steps;
  r.forward_tokens = after.n_forward_tokens - before.n_forward_tokens;
  r.cached_tokens = after.n_prompt_tokens_cached - before.n_prompt_tokens_cached;
  r.query_tokens = after.n_prefix_query_tokens - before.n_prefix_query_tokens;
  r.hits = after.n_prefix_hits - before.n_prefix_hits;
  r.queries = after.n_prefix_queries - before.n_prefix_queries;
  r.masked_rows = after.n_masked_rows - before.n_masked_rows;
  r.mask_ms = (after.mask_seconds - before.mask_seconds) * 1e3;
  profile_steps(events, w.n_requests, r);
  return r;
}

void print_row(const std::string& label, int32_t n_requests, const RunResult& r) {
  stdout_print("| {:<6} | {:>8} | {:>9} | {:>10.2f} | {:>10.2f} | {:>8.1f} | {:>8.1f} | {:>7.2f} | {:>7.2f} | {:>8.1f} | "
               "{:>8.1f} | {:>7} | {:>5} | {:>6} | {:>5.1f} |\n",
               label, n_requests, r.n_generated, r.output_tps, r.prompt_tps, r.ttft_p50, r.ttft_p99, r.itl_p50,
               r.itl_p99, r.e2e_p50, r.e2e_p99, r.preemptions, r.steps, r.cached_tokens, r.hit_rate());
  fail_if_stdout_failed();
}

// Each column's median over the runs (counts included: they differ only when preemption does).
RunResult median_of(const std::vector<RunResult>& runs) {
  auto med = [&](auto field) {
    std::vector<double> v;
    for (const RunResult& r : runs) v.push_back(static_cast<double>(r.*field));
    return percentile(v, 0.5);
  };
  RunResult m;
  m.n_generated = static_cast<int64_t>(med(&RunResult::n_generated));
  m.output_tps = med(&RunResult::output_tps);
  m.prompt_tps = med(&RunResult::prompt_tps);
  m.ttft_p50 = med(&RunResult::ttft_p50);
  m.ttft_p99 = med(&RunResult::ttft_p99);
  m.itl_p50 = med(&RunResult::itl_p50);
  m.itl_p99 = med(&RunResult::itl_p99);
  m.e2e_p50 = med(&RunResult::e2e_p50);
  m.e2e_p99 = med(&RunResult::e2e_p99);
  m.preemptions = static_cast<int64_t>(med(&RunResult::preemptions));
  m.steps = static_cast<int64_t>(med(&RunResult::steps));
  m.forward_tokens = static_cast<int64_t>(med(&RunResult::forward_tokens));
  m.cached_tokens = static_cast<int64_t>(med(&RunResult::cached_tokens));
  m.query_tokens = static_cast<int64_t>(med(&RunResult::query_tokens));
  m.hits = static_cast<int64_t>(med(&RunResult::hits));
  m.queries = static_cast<int64_t>(med(&RunResult::queries));
  m.masked_rows = static_cast<int64_t>(med(&RunResult::masked_rows));
  m.mask_ms = med(&RunResult::mask_ms);
  m.full_steps = static_cast<int64_t>(med(&RunResult::full_steps));
  m.timed_steps = static_cast<int64_t>(med(&RunResult::timed_steps));
  m.step_ms = med(&RunResult::step_ms);
  m.row_gap_ms = med(&RunResult::row_gap_ms);
  return m;
}

// The decode steady state against its ceiling: a full step (one row a request) reads the weights
// once and each request's K/V (its mean context over the steps, P + G / 2 tokens) and computes
// 2 x the weights' elements a row. With --roofline-gbs (and --roofline-tflops) the step's least
// time, whichever bound is larger, and the run's share of that ceiling.
void print_decode_ceiling(const ConcurrencyBenchOptions& o, const RunResult& m, const DecodeCost& cost,
                          double kv_bytes_per_token) {
  const double n = o.concurrency, context = o.n_prompt + o.n_gen / 2.0;
  const double weight_gb = cost.weight_bytes / 1e9, kv_gb = n * context * kv_bytes_per_token / 1e9;
  const double tflop = n * 2.0 * static_cast<double>(cost.weight_elements) / 1e12;
  const bool timed = m.timed_steps > 0;
  const double tps = timed ? n / (m.step_ms * 1e-3) : 0.0;
  stdout_print("decode: {} rows a step {}; a step reads {:.4g} GB of weights + {:.4g} GB of K/V ({} x {:.0f} tokens "
               "of context x {:.0f} bytes) and computes {:.4g} TFLOP",
               o.concurrency,
               timed ? fmt::format("in {:.4g} ms = {:.0f} tokens/s", m.step_ms, tps)
                     : std::string("not timed (no two full steps back to back: raise --gen)"),
               weight_gb, kv_gb, o.concurrency, context, kv_bytes_per_token, tflop);
  if (o.roofline_gbs > 0) {
    const double bytes_ms = (weight_gb + kv_gb) / o.roofline_gbs * 1e3;
    const double flop_ms = o.roofline_tflops > 0 ? tflop / o.roofline_tflops * 1e3 : 0.0;
    const double least_ms = std::max(bytes_ms, flop_ms);
    const double ceiling = n / (least_ms * 1e-3);
    stdout_print("; at {} GB/s{} the step takes at least {:.4g} ms ({}): a ceiling of {:.0f} tokens/s{}",
                 o.roofline_gbs, o.roofline_tflops > 0 ? fmt::format(" and {} TFLOP/s", o.roofline_tflops) : "",
                 least_ms, bytes_ms >= flop_ms ? "bytes" : "FLOPs", ceiling,
                 timed ? fmt::format(", {:.1f} % of it reached", 100.0 * tps / ceiling) : std::string());
  }
  stdout_print("\n");
}

// The pool: --kv-tokens, or every request's P + G rounded up to whole blocks (the scheduler holds
// whole blocks per request), so that nothing is preempted. Refuses what cannot run, with numbers.
int32_t kv_pool_tokens(const ConcurrencyBenchOptions& o) {
  const int64_t per_request = int64_t{o.n_prompt} + o.n_gen;
  if (o.kv_tokens > 0) {
    if (o.kv_tokens < per_request) {
      fail("bench", out_of_range(fmt::format("--kv-tokens {} cannot hold one request of --prompt {} + --gen {} = {} "
                                             "tokens: use --kv-tokens {} or more (0: enough for all {} requests)",
                                             o.kv_tokens, o.n_prompt, o.n_gen, per_request, per_request,
                                             o.concurrency)));
    }
    return o.kv_tokens;
  }
  const int64_t blocks = (per_request + kBlockSize - 1) / kBlockSize;
  const int64_t pool = int64_t{o.concurrency} * blocks * kBlockSize;
  if (pool > kInt32Max) {
    fail("bench", out_of_range(fmt::format("--concurrency {} x (--prompt {} + --gen {}) needs a KV pool of {} tokens, "
                                           "more than {}: use a smaller --concurrency, --prompt or --gen, or a "
                                           "--kv-tokens pool (requests are then preempted)",
                                           o.concurrency, o.n_prompt, o.n_gen, pool, kInt32Max)));
  }
  return static_cast<int32_t>(pool);
}

}  // namespace

void bench_concurrency(const ModelOptions& model, const ConcurrencyBenchOptions& o) {
  if (o.shared_prefix > o.n_prompt) {
    fail("bench", out_of_range(fmt::format("--shared-prefix {} is longer than the prompt (--prompt {}): use at most {}",
                                           o.shared_prefix, o.n_prompt, o.n_prompt)));
  }
  const int32_t kv_tokens = kv_pool_tokens(o);
  auto engine = load_engine_or_exit("bench", model);
  const int32_t n_ctx_train = engine->model().hparams().n_ctx_train;
  const int64_t n_ctx = model.ctx > 0 ? model.ctx : n_ctx_train;
  const int64_t per_request = int64_t{o.n_prompt} + o.n_gen;
  if (per_request > n_ctx) {
    const std::string ctx_source = model.ctx > 0 ? fmt::format("-c {}", model.ctx) : "-c 0: the model's training context";
    fail("bench", out_of_range(fmt::format("--prompt {} + --gen {} = {} tokens a request do not fit the context of {} "
                                           "tokens ({}): use -c {} or more, or a smaller --prompt or --gen",
                                           o.n_prompt, o.n_gen, per_request, n_ctx, ctx_source, per_request)));
  }
  const uint64_t kv_bytes =
      engine->kv_cache_bytes({.n_ctx = kv_tokens, .n_batch = model.batch, .kv_block_size = kBlockSize},
                             /*paged_sliding=*/true);  // the loop's prefix cache pages the sliding layers
  const uint64_t memory = physical_memory_bytes();
  if (engine->backend().device() == Device::kCpu && memory > 0 && kv_bytes > memory) {
    fail("bench", out_of_range(fmt::format("a KV pool of {} tokens needs {:.1f} GiB, more than the {:.1f} GiB of "
                                           "memory this machine has: use a smaller --concurrency, or --kv-tokens "
                                           "(requests are then preempted)",
                                           kv_tokens, kv_bytes / 1073741824.0, memory / 1073741824.0)));
  }
  auto loop = runtime::EngineLoop::create(engine->model(), engine->tokenizer(),
                                          {.n_ctx = static_cast<int32_t>(n_ctx),
                                           .max_batch_tokens = model.batch,
                                           .max_running = o.concurrency,
                                           .max_waiting = o.concurrency,
                                           .kv_block_size = kBlockSize,
                                           .kv_tokens = kv_tokens,
                                           .kv_type = engine->kv_type()});
  if (!loop.ok()) fail("bench", loop.status());
  const auto grammar_start = std::chrono::steady_clock::now();
  const auto grammar = load_grammar_or_exit("bench", o.grammar, engine->tokenizer(), kDefaultMaxInputMiB);
  const double grammar_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - grammar_start).count();
  const format::GgufFile& f = engine->file();
  // The header first, flushed: a stdout that cannot be written stops the bench before it runs.
  stdout_print("model: {} ({}, {:.2f} GiB)\nbackend: {}, kv cache {}\n", model.model,
               f.get_or<std::string>("general.name", "?").value_or("?"), f.file_size() / 1073741824.0,
               engine->device_name(), dtype_name(engine->kv_type()));
  stdout_print("workload: {} requests submitted at once, each {} random prompt tokens ({} of them shared by all) + "
               "{} greedy tokens\nengine loop: max_running {}, max_batch_tokens {} (-b), n_ctx {}, KV pool {} tokens "
               "({:.1f} MiB)\n",
               o.concurrency, o.n_prompt, o.shared_prefix, o.n_gen, o.concurrency, model.batch, (*loop)->n_ctx(),
               kv_tokens, kv_bytes / 1048576.0);
  if (grammar != nullptr) {
    stdout_print("grammar: every request constrained by {} {} (compiled and precomputed in {:.1f} ms: {} token tables)\n",
                 o.grammar.json_schema_file.empty() ? "--grammar" : "--json-schema",
                 o.grammar.json_schema_file.empty() ? o.grammar.grammar_file : o.grammar.json_schema_file, grammar_ms,
                 grammar->table_count());
  }
  stdout_flush();
  fail_if_stdout_failed();

  // The model's rows past the tokenizer's vocabulary (padding) are no valid prompt ids.
  const Workload w{.n_requests = o.concurrency,
                   .n_prompt = o.n_prompt,
                   .n_gen = o.n_gen,
                   .shared_prefix = o.shared_prefix,
                   .n_vocab = std::min(engine->model().hparams().n_vocab, engine->tokenizer().n_vocab()),
                   .grammar = grammar};
  std::mt19937 rng(42);
  run_once(**loop, rng, w);  // warm-up (page faults, caches, thread pool), discarded as in the single bench
  stdout_print("\n| {:<6} | {:>8} | {:>9} | {:>10} | {:>10} | {:>8} | {:>8} | {:>7} | {:>7} | {:>8} | {:>8} | {:>7} | {:>5} "
               "| {:>6} | {:>5} |\n",
               "run", "requests", "generated", "output t/s", "prompt t/s", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99",
               "E2E p50", "E2E p99", "preempt", "steps", "cached", "hit %");
  stdout_print("|{:-<8}|{:->10}|{:->11}|{:->12}|{:->12}|{:->10}|{:->10}|{:->9}|{:->9}|{:->10}|{:->10}|{:->9}|{:->7}|{:->8}|{:->7}|\n",
               "", "", "", "", "", "", "", "", "", "", "", "", "", "", "");
  std::vector<RunResult> runs;
  for (int32_t r = 0; r < o.reps; ++r) {
    runs.push_back(run_once(**loop, rng, w));
    print_row(std::to_string(r + 1), o.concurrency, runs.back());
  }
  const RunResult m = median_of(runs);
  if (runs.size() > 1) print_row("median", o.concurrency, m);
  (*loop)->shutdown(runtime::ShutdownMode::kDrain);
  if (const Status st = (*loop)->check_pool_after_shutdown(); !st.ok()) fail("bench", st);

  const int64_t no_reuse = int64_t{o.concurrency} * (o.n_prompt + o.n_gen - 1);
  stdout_print("\nmeasured runs: {}, after one warm-up; times in ms from each request's submit, taken when the loop hands out a "
               "token. output t/s = generated tokens / (first submit -> last token); prompt t/s = prompt tokens / "
               "(first submit -> the last request's first token); ITL over every gap between a request's tokens. "
               "cached = prompt tokens taken from the prefix cache; hit % = cached / prompt tokens looked up at "
               "admission (re-admissions after preemption included).\n",
               o.reps);
  stdout_print("prefix cache: hit rate {:.1f} % ({} of {} tokens looked up, {} of {} admissions hit, median a run); "
               "{} tokens computed a run, {} x ({} + {} - 1) = {} without any reuse{}\n",
               m.hit_rate(), m.cached_tokens, m.query_tokens, m.hits, m.queries, m.forward_tokens, o.concurrency,
               o.n_prompt, o.n_gen, no_reuse,
               o.shared_prefix > 0
                   ? fmt::format("; the {} shared prompt tokens fill {} whole blocks of {}: a request admitted "
                                 "after a forward computed them takes those from the cache",
                                 o.shared_prefix, o.shared_prefix / kBlockSize, kBlockSize)
                   : std::string());
  if (m.masked_rows > 0) {
    stdout_print("grammar masks: {} rows a run sampled under a mask; the loop's thread spent {:.2f} ms a run computing "
                 "them ({:.2f} us a row), median\n",
                 m.masked_rows, m.mask_ms, m.mask_ms * 1e3 / static_cast<double>(m.masked_rows));
  }
  if (m.full_steps > 0) {
    stdout_print("steps in which all {} requests had a row: {} a run, {}", o.concurrency, m.full_steps,
                 m.timed_steps > 0 ? fmt::format("median {:.4g} ms each", m.step_ms)
                                   : std::string("none followed by another to time it"));
    if (o.concurrency > 1 && m.timed_steps > 0) {
      stdout_print("; {:.3f} ms between two rows of a step (host work between the rows' callbacks: text decoding, "
                   "stop rules, and sampling where the loop samples row by row), so about {:.4g} ms a step for the "
                   "rest (forward, batched sampling, scheduling)",
                   m.row_gap_ms, std::max(0.0, m.step_ms - o.concurrency * m.row_gap_ms));
    }
    stdout_print("\n");
    print_decode_ceiling(o, m, decode_cost(f, engine->model().hparams()), double(kv_bytes) / kv_tokens);
  }
  fail_if_stdout_failed();  // main's final flush catches what is still buffered
}

}  // namespace cera::cli
