// POST /v1/embeddings (OpenAI's shape): `input` a string, an array of strings, an array of token
// ids or an array of such arrays; `encoding_format` "float" (default) or "base64" (the float32
// values little-endian, as OpenAI's SDKs decode them); `dimensions` keeps the first N values and
// normalises them again (OpenAI's and sentence-transformers' truncate_dim: meaningful for models
// trained for it, e.g. Matryoshka ones; any 1..n_embd is accepted). cera's own fields: `pooling`
// ("mean", "cls", "last"; default the model's) and `normalize` (default the model's, true for
// most). Pooling "none" (a vector per token) has no place in this response and is refused.
// Every check runs before any work, and an error names the field.
#include <fmt/format.h>
#include <httplib.h>

#include <bit>
#include <cmath>
#include <cstring>

#include "request_json.h"
#include "runtime/embed/embed_service.h"
#include "server.h"

namespace cera::server {
namespace {

// RFC 4648 base64. Written here because it is 20 lines and no Debian library the project already
// uses (httplib's is internal to its detail namespace) offers one.
std::string base64(const void* data, size_t n) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  const auto* p = static_cast<const unsigned char*>(data);
  std::string out;
  out.reserve((n + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 3 <= n; i += 3) {
    const uint32_t v = uint32_t{p[i]} << 16 | uint32_t{p[i + 1]} << 8 | p[i + 2];
    for (int s = 18; s >= 0; s -= 6) out += kAlphabet[(v >> s) & 63];
  }
  if (i < n) {
    const uint32_t v = uint32_t{p[i]} << 16 | (i + 1 < n ? uint32_t{p[i + 1]} << 8 : 0);
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    out += i + 1 < n ? kAlphabet[(v >> 6) & 63] : '=';
    out += '=';
  }
  return out;
}

struct EmbeddingsJob {
  std::vector<std::string> texts;           // when the input is text
  std::vector<std::vector<int32_t>> tokens;  // when it is token ids
  bool base64 = false;
  int64_t dimensions = 0;  // 0: all
  runtime::embed::EmbedOptions options;
};

// Reads `input` as text(s) or token id array(s) into the job.
void read_input(const Json& input, int32_t n_vocab, FieldReader& r, EmbeddingsJob& job) {
  const auto read_ids = [&](const Json& arr, const std::string& name, std::vector<int32_t>& out) {
    for (size_t k = 0; k < arr.size(); ++k) {
      const Json& t = arr[k];
      const bool integer = t.is_number_integer() || t.is_number_unsigned();
      const int64_t id = !integer || (t.is_number_unsigned() && t.get<uint64_t>() > INT64_MAX) ? -1 : t.get<int64_t>();
      if (id < 0 || id >= n_vocab) {
        return r.fail("input", fmt::format("'{}[{}]' is {}: not a token id of this model (0 to {})", name, k, t.dump(),
                                           n_vocab - 1));
      }
      out.push_back(static_cast<int32_t>(id));
    }
  };
  if (input.is_string()) {
    job.texts.push_back(input.get<std::string>());
    return;
  }
  if (!input.is_array()) {
    return r.fail("input", fmt::format("'input' must be a string, an array of strings or of token ids, not {}",
                                       json_type_name(input)));
  }
  if (input.empty()) return r.fail("input", "'input' is an empty array: give at least one text");
  if (input[0].is_number()) {  // one text as token ids
    job.tokens.emplace_back();
    return read_ids(input, "input", job.tokens.back());
  }
  for (size_t i = 0; i < input.size() && r.ok(); ++i) {
    const Json& item = input[i];
    const std::string name = fmt::format("input[{}]", i);
    if (item.is_string() && job.tokens.empty()) {
      job.texts.push_back(item.get<std::string>());
    } else if (item.is_array() && job.texts.empty()) {
      job.tokens.emplace_back();
      read_ids(item, name, job.tokens.back());
    } else {
      r.fail("input", fmt::format("'{}' is {}: 'input' must be all strings or all arrays of token ids", name,
                                  json_type_name(item)));
    }
  }
}

}  // namespace

void HttpServer::embeddings(const httplib::Request& req, httplib::Response& res) {
  const ServedModel* model = model_or_503(res);
  if (model == nullptr) return;
  auto body = parse_request_body(req.body, options_.max_json_depth);
  if (auto* e = std::get_if<ApiError>(&body)) return write_error(res, *e);
  const Json& b = std::get<Json>(body);
  FieldReader r(b);
  EmbeddingsJob job;
  const int32_t n_embd = model->embeddings->n_embd();
  if (const Json* input = r.get("input")) {
    read_input(*input, model->tokenizer().n_vocab(), r, job);
  } else {
    r.fail("input", "'input' is missing: give the text (or an array of texts) to embed");
  }
  if (const auto format = r.string("encoding_format")) {
    if (*format == "base64") job.base64 = true;
    else if (*format != "float") r.fail("encoding_format", fmt::format("'encoding_format' is '{}': use 'float' or 'base64'", *format));
  }
  if (const auto dims = r.integer("dimensions", 1, n_embd)) job.dimensions = *dims;
  if (const auto pooling = r.string("pooling")) {
    const auto p = runtime::embed::pooling_from_name(*pooling);
    if (!p || *p == runtime::embed::Pooling::kNone) {
      r.fail("pooling", fmt::format("'pooling' is '{}': use 'mean', 'cls' or 'last' (a vector per token, 'none', does "
                                    "not fit this response)",
                                    *pooling));
    } else {
      job.options.pooling = *p;
    }
  }
  job.options.normalize = r.boolean("normalize");
  if (const auto name = r.string("model"); name && *name != model->id) {
    return write_error(res, {.status = 404,  // as the completions routes
                             .message = fmt::format("the model '{}' does not exist: this server serves '{}' (GET /v1/models)",
                                                    name->substr(0, 200), model->id),
                             .param = "model",
                             .code = "model_not_found"});
  }
  if (!r.ok()) return write_error(res, *r.error());

  auto result = job.texts.empty() ? model->embeddings->embed_tokens(job.tokens, job.options)
                                  : model->embeddings->embed_texts(job.texts, job.options);
  if (!result.ok()) return write_error(res, error_from_status(result.status(), "input"));
  Json data = Json::array();
  int64_t n_tokens = 0;
  const bool normalized = job.options.normalize.value_or(model->engine->model().hparams().embedding_normalize);
  for (size_t i = 0; i < result->size(); ++i) {
    std::vector<float>& v = (*result)[i].values;
    n_tokens += (*result)[i].n_tokens;
    if (job.dimensions > 0 && job.dimensions < static_cast<int64_t>(v.size())) {
      v.resize(static_cast<size_t>(job.dimensions));
      if (normalized) runtime::embed::l2_normalize(v, static_cast<int32_t>(v.size()));
    }
    Json e = {{"object", "embedding"}, {"index", i}};
    static_assert(std::endian::native == std::endian::little, "base64 embeddings are little-endian float32");
    if (job.base64) e["embedding"] = base64(v.data(), v.size() * sizeof(float));
    else e["embedding"] = v;
    data.push_back(std::move(e));
  }
  res.set_content(dump({{"object", "list"},
                        {"data", std::move(data)},
                        {"model", model->id},
                        {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}}}),
                  "application/json");
}

}  // namespace cera::server
