// The handlers of the JSON routes: generation (chat and legacy completions, whole or streamed as
// server-sent events), tokenize / detokenize and the model list. The one decision: every check
// that can refuse a request (JSON, fields, lengths, the queue) runs before a byte of the response
// is written, so a refusal is always a plain HTTP error; once a stream has started, only the
// engine failing can end it early, and that is reported as a final error event.
#include <fmt/format.h>
#include <httplib.h>

#include <cstdio>

#include "completion_run.h"
#include "openai_request.h"
#include "openai_response.h"
#include "request_json.h"
#include "server.h"

namespace cera::server {
namespace {

void write_json(httplib::Response& res, const Json& body) { res.set_content(dump(body), "application/json"); }

std::string sse(const Json& event) { return "data: " + dump(event) + "\n\n"; }

// The state of one streamed response, shared by httplib's content provider and its releaser.
struct StreamState {
  CompletionJob job;
  ResponseId id;
  std::unique_ptr<CompletionRun> run;
  const tokenizer::Tokenizer* tokenizer = nullptr;
  std::vector<ChoiceNews> news;
  std::vector<bool> started;        // [n] the choice's first chunk went out
  std::vector<size_t> text_offset;  // [n] bytes of text sent (completions' logprob offsets)
  // Chat with tools or reasoning (CompletionJob::parses_output): each choice's parser, and
  // whether it made a call (its finish reason is then "tool_calls").
  std::vector<std::unique_ptr<runtime::chat::OutputParser>> parsers;
  std::vector<bool> made_calls;
  int64_t n_completion = 0;
  int32_t n_cached = 0;
  bool finished = false;
};

// Writes what the choices produced since the last call; false when the client has gone.
bool pump(StreamState& st, httplib::DataSink& sink) {
  const bool more = st.run->take(st.news, std::chrono::milliseconds(100));
  if (more) {
    for (int32_t i = 0; i < static_cast<int32_t>(st.news.size()); ++i) {
      ChoiceNews& c = st.news[i];
      const bool has_text = !c.text.empty() || !c.logprobs.empty();
      if (!has_text && !c.result && st.started[i]) continue;
      if (c.result) {
        st.n_completion += static_cast<int64_t>(c.result->tokens.size());
        st.n_cached = std::max(st.n_cached, c.result->n_cached_tokens);
        if (c.result->reason == runtime::FinishReason::kError) {
          const ApiError e{.status = 500, .message = "generation failed: " + c.result->status.to_string(),
                           .type = "server_error", .code = "internal_error"};
          const std::string event = "data: " + error_body(e) + "\n\n";
          if (!sink.write(event.data(), event.size())) return false;
        }
      }
      // Parsed output: its pieces as deltas, one chunk each (logprobs ride on the first, the
      // finish reason on the last); a chunk still goes out for the role, logprobs or the end.
      std::vector<Json> deltas;
      if (!st.parsers.empty()) {
        std::vector<runtime::chat::OutputDelta> pieces;
        if (!c.text.empty()) st.parsers[i]->push(c.text, pieces);
        if (c.result) {
          const Status parsed = st.parsers[i]->finish(pieces);
          if (!parsed.ok()) std::fprintf(stderr, "cera serve: choice %d: %s (sent as content)\n", i, parsed.to_string().c_str());
        }
        for (const runtime::chat::OutputDelta& d : pieces) {
          if (d.kind == runtime::chat::OutputDelta::Kind::kToolCall) st.made_calls[i] = true;
        }
        deltas = chat_deltas(pieces);
        if (deltas.empty() && st.started[i] && c.logprobs.empty() && !c.result) continue;
      }
      const size_t n_chunks = st.parsers.empty() ? 1 : std::max<size_t>(1, deltas.size());
      for (size_t k = 0; k < n_chunks; ++k) {
        const bool last = k + 1 == n_chunks;
        const Json empty = Json::object();
        // A chat stream's first chunk of a choice carries its role; its last its finish reason.
        const std::string chunk =
            sse(stream_chunk(st.job, st.id,
                             {.index = i,
                              .first = !st.started[i],
                              .text = st.parsers.empty() ? std::move(c.text) : std::string(),
                              .logprobs = st.job.params.logprobs && k == 0 ? &c.logprobs : nullptr,
                              .text_offset = st.text_offset[i],
                              .result = c.result && last ? &*c.result : nullptr,
                              .delta = st.parsers.empty() ? nullptr : k < deltas.size() ? &deltas[k] : &empty,
                              .made_tool_calls = !st.made_calls.empty() && st.made_calls[i]},
                             *st.tokenizer));
        st.started[i] = true;
        if (!sink.write(chunk.data(), chunk.size())) return false;
      }
      for (const runtime::TokenLogprobs& lp : c.logprobs) st.text_offset[i] += st.tokenizer->token_piece(lp.chosen.token).size();
    }
    return true;
  }
  // Every choice ended and was sent.
  std::string tail;
  if (st.job.include_usage) tail += sse(usage_chunk(st.job, st.id, st.n_completion, st.n_cached));
  tail += "data: [DONE]\n\n";
  st.finished = true;
  if (!sink.write(tail.data(), tail.size())) return false;
  sink.done();
  return true;
}

}  // namespace

void HttpServer::completions(const httplib::Request& req, httplib::Response& res, bool chat) {
  const auto arrival = CompletionRun::Clock::now();
  const ServedModel* model = model_or_503(res);
  if (model == nullptr) return;
  if (model->loop == nullptr) {
    return write_error(res, bad_request(fmt::format("the model '{}' is an encoder: it computes embeddings "
                                                    "(POST /v1/embeddings) and cannot generate text",
                                                    model->id),
                                        "model", "model_not_generative"));
  }
  auto body = parse_request_body(req.body, options_.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&body)) return write_error(res, *e);
  auto job = read_completion_job(chat ? Endpoint::kChat : Endpoint::kCompletion, std::get<Json>(body), *model);
  if (auto* e = std::get_if<ApiError>(&job)) return write_error(res, *e);
  CompletionJob& j = std::get<CompletionJob>(job);
  auto started = CompletionRun::start(j, *model, metrics_, arrival);
  if (auto* e = std::get_if<ApiError>(&started)) return write_error(res, *e);
  std::unique_ptr<CompletionRun> run = std::move(std::get<std::unique_ptr<CompletionRun>>(started));
  const ResponseId id = new_response_id(j.endpoint, *model);

  if (!j.stream) {
    const std::vector<runtime::RequestResult> results = run->wait_all();
    for (const runtime::RequestResult& r : results) {
      if (r.reason == runtime::FinishReason::kError)
        return write_error(res, {.status = 500, .message = "generation failed: " + r.status.to_string(),
                                 .type = "server_error", .code = "internal_error"});
    }
    return write_json(res, full_response(j, id, results, model->tokenizer()));
  }

  auto st = std::make_shared<StreamState>();
  st->job = std::move(j);
  st->id = id;
  st->run = std::move(run);
  st->tokenizer = &model->tokenizer();
  st->started.assign(st->job.n, false);
  st->text_offset.assign(st->job.n, 0);
  if (st->job.parses_output()) {
    for (int32_t i = 0; i < st->job.n; ++i) {
      runtime::chat::OutputParserOptions options = st->job.output;
      options.id_seed += static_cast<uint64_t>(i);  // as full_response's choice i
      st->parsers.push_back(std::make_unique<runtime::chat::OutputParser>(options));
    }
    st->made_calls.assign(st->job.n, false);
  }
  res.set_header("Cache-Control", "no-cache");
  res.set_header("X-Accel-Buffering", "no");  // proxies must not hold the events back
  res.set_chunked_content_provider(
      "text/event-stream",
      [st](size_t, httplib::DataSink& sink) { return st->finished || pump(*st, sink); },
      [st](bool) {
        // Everything was sent (httplib may still report failure: the client closed after [DONE]).
        if (st->finished) return;
        // The client went away (or the write timed out): the requests leave the batch at the
        // loop's next step and their KV blocks go back to the pool.
        st->run->cancel();
        std::fprintf(stderr, "cera serve: request %llu cancelled: the client disconnected after %lld tokens\n",
                     static_cast<unsigned long long>(st->run->first_id()),
                     static_cast<long long>(st->run->n_tokens_generated()));
      });
}

void HttpServer::tokenize(const httplib::Request& req, httplib::Response& res) {
  const ServedModel* model = model_or_503(res);
  if (model == nullptr) return;
  auto body = parse_request_body(req.body, options_.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&body)) return write_error(res, *e);
  const Json& b = std::get<Json>(body);
  FieldReader r(b);
  std::vector<int32_t> ids;
  if (const Json* messages = r.get("messages")) {
    // The chat prompt exactly as /v1/chat/completions builds it (its tools too).
    auto tools = read_chat_tools(b, *model);
    if (auto* e = std::get_if<ApiError>(&tools)) return write_error(res, *e);
    ids = chat_prompt_tokens(*messages, *model, r, std::get<ChatTools>(tools));
  } else {
    const std::optional<std::string> content = r.string("content");
    const bool add_special = r.boolean("add_special").value_or(false);
    const bool parse_special = r.boolean("parse_special").value_or(false);
    if (r.ok() && !content) r.fail("content", "'content' is missing: give the text to tokenize (or 'messages')");
    if (r.ok()) ids = model->tokenizer().encode(*content, {.add_special = add_special, .parse_special = parse_special});
  }
  if (!r.ok()) return write_error(res, *r.error());
  const bool with_pieces = r.boolean("with_pieces").value_or(false);
  if (!r.ok()) return write_error(res, *r.error());
  Json tokens = Json::array();
  for (const int32_t id : ids) {
    if (with_pieces) tokens.push_back({{"id", id}, {"piece", std::string(model->tokenizer().token_piece(id, true))}});
    else tokens.push_back(id);
  }
  write_json(res, {{"tokens", std::move(tokens)}});
}

void HttpServer::detokenize(const httplib::Request& req, httplib::Response& res) {
  const ServedModel* model = model_or_503(res);
  if (model == nullptr) return;
  auto body = parse_request_body(req.body, options_.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&body)) return write_error(res, *e);
  FieldReader r(std::get<Json>(body));
  const Json* tokens = r.get("tokens");
  if (tokens == nullptr || !tokens->is_array()) {
    return write_error(res, bad_request(tokens == nullptr ? "'tokens' is missing: give an array of token ids"
                                                          : fmt::format("'tokens' must be an array of token ids, not {}",
                                                                        json_type_name(*tokens)),
                                        "tokens"));
  }
  const int32_t n_vocab = model->tokenizer().n_vocab();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < tokens->size(); ++i) {
    const Json& t = (*tokens)[i];
    const bool integer = t.is_number_integer() || t.is_number_unsigned();
    const int64_t id = !integer || (t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX) ? -1 : t.get<int64_t>();
    if (id < 0 || id >= n_vocab) {
      return write_error(res, bad_request(fmt::format("'tokens[{}]' is {}: not a token id of this model (0 to {})", i,
                                                      t.dump(), n_vocab - 1),
                                          "tokens"));
    }
    ids.push_back(static_cast<int32_t>(id));
  }
  write_json(res, {{"content", model->tokenizer().decode(ids)}});
}

void HttpServer::models(httplib::Response& res) {
  const ServedModel* model = model_or_503(res);
  if (model == nullptr) return;
  write_json(res, {{"object", "list"},
                   {"data", Json::array({{{"id", model->id},
                                          {"object", "model"},
                                          {"created", model->created},
                                          {"owned_by", "cera"},
                                          {"meta", {{"n_ctx", model->n_ctx},
                                                    {"n_vocab", model->tokenizer().n_vocab()},
                                                    {"max_tokens", model->max_tokens}}}}})}});
}

}  // namespace cera::server
