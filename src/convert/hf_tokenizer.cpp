// Special-token ids are resolved like gguf-py's SpecialVocab: tokenizer_config.json names a
// token by its text, looked up among tokenizer.json's added tokens; config.json's *_token_id
// fills what is still unset (first one set wins). One departure: BPE-with-byte-fallback vocabs
// get score -id (merge order) instead of llama.cpp's flat -1000, so SPM merging keeps its order.
#include "convert/hf_tokenizer.h"

#include <map>
#include <optional>

#include "core/read_file.h"

namespace cera::convert {
namespace {

// Pre-tokenizer regexes as they appear (JSON-decoded) in tokenizer.json.
constexpr std::string_view kLlama3Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
constexpr std::string_view kQwen2Regex =
    R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";

struct Vocab {
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  std::vector<bool> set;
};

// llama.cpp's does_token_look_special.
bool looks_special(const std::string& t) {
  auto starts = [&](std::string_view p) { return t.compare(0, p.size(), p) == 0; };
  auto ends = [&](std::string_view s) { return t.size() >= s.size() && t.compare(t.size() - s.size(), s.size(), s) == 0; };
  if (t == "<pad>" || t == "<mask>" || t == "<2mass>" || t == "[@BOS@]") return true;
  if (starts("<|") && ends("|>")) return true;
  if (starts("<\xEF\xBD\x9C") && ends("\xEF\xBD\x9C>")) return true;  // deepseek's fullwidth bar
  return starts("<unused") && ends(">");
}

bool is_byte_token(const std::string& t) {
  auto hex = [](char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; };
  return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && hex(t[3]) && hex(t[4]) && t[5] == '>';
}

Status put(Vocab& v, int64_t id, std::string text, float score, TokenType type, const std::string& where) {
  if (id < 0 || static_cast<uint64_t>(id) >= v.tokens.size()) {
    return out_of_range(where + ": token '" + text + "' has id " + std::to_string(id) + ", outside the vocabulary of " +
                        std::to_string(v.tokens.size()) + " (config.json vocab_size)");
  }
  v.tokens[id] = std::move(text);
  v.scores[id] = score;
  v.types[id] = static_cast<int32_t>(type);
  v.set[id] = true;
  return {};
}

std::optional<std::string> token_text(const JsonValue* entry) {
  if (!entry) return std::nullopt;
  if (entry->as_string()) return *entry->as_string();
  if (const JsonValue* c = entry->find("content"); c && c->as_string()) return *c->as_string();
  return std::nullopt;
}

Result<std::string> read_text(const std::filesystem::path& p) {
  constexpr uint64_t kMaxTokenizerFileBytes = 512ull << 20;  // real ones are a few tens of MB
  return read_file(p, kMaxTokenizerFileBytes);
}

// Merges are "a b" strings (old format) or [a, b] pairs (tokenizers >= 0.20); spaces inside
// pair parts are written as U+0120 like gguf-py so the "a b" split stays unambiguous.
Result<std::vector<std::string>> read_merges(const JsonValue& model, const std::string& where) {
  std::vector<std::string> out;
  const JsonValue* merges = model.find("merges");
  if (!merges || !merges->is_array()) return not_found(where + ": BPE model has no 'merges' list");
  for (const JsonValue& m : *merges->as_array()) {
    if (m.as_string()) {
      out.push_back(*m.as_string());
      continue;
    }
    if (!m.is_array() || m.size() != 2 || !(*m.as_array())[0].as_string() || !(*m.as_array())[1].as_string()) {
      return invalid_argument(where + ": merge #" + std::to_string(out.size()) + " is neither \"a b\" nor [a, b]");
    }
    std::string joined;
    for (int part = 0; part < 2; ++part) {
      if (part) joined += ' ';
      for (char c : *(*m.as_array())[part].as_string()) {
        if (c == ' ') joined += "\xC4\xA0";
        else joined += c;
      }
    }
    out.push_back(std::move(joined));
  }
  return out;
}

}  // namespace

std::string detect_bpe_pre(const JsonValue& tok, std::vector<std::string>& notes) {
  std::vector<const JsonValue*> stages;
  const JsonValue* pre = tok.find("pre_tokenizer");
  if (pre && pre->is_object()) {
    const JsonValue* type = pre->find("type");
    const JsonValue* list = pre->find("pretokenizers");
    if (type && type->as_string() && *type->as_string() == "Sequence" && list && list->is_array()) {
      for (const JsonValue& s : *list->as_array()) stages.push_back(&s);
    } else {
      stages.push_back(pre);
    }
  }
  std::vector<std::string> regexes;
  bool byte_level_regex = false, individual_digits = false;
  for (const JsonValue* s : stages) {
    const JsonValue* type = s->find("type");
    if (!type || !type->as_string()) continue;
    if (*type->as_string() == "Split") {
      const JsonValue* pat = s->find("pattern");
      if (pat && pat->find("Regex") && pat->find("Regex")->as_string()) regexes.push_back(*pat->find("Regex")->as_string());
    } else if (*type->as_string() == "ByteLevel") {
      const JsonValue* use = s->find("use_regex");
      byte_level_regex = !use || use->as_bool().value_or(true);
    } else if (*type->as_string() == "Digits") {
      const JsonValue* ind = s->find("individual_digits");
      individual_digits = ind && ind->as_bool().value_or(false);
    }
  }
  if (regexes.size() == 1 && regexes[0] == kLlama3Regex) return "llama-bpe";
  if (regexes.size() == 1 && regexes[0] == kQwen2Regex) return "qwen2";
  if (regexes.empty() && byte_level_regex) return individual_digits ? "smollm" : "gpt-2";
  notes.push_back("warning: BPE pre-tokenizer not recognised; tokenizer.ggml.pre = \"default\"");
  return "default";
}

Status add_hf_tokenizer(const std::filesystem::path& dir, const HfConfig& config, format::GgufWriter& w,
                        std::vector<std::string>& notes) {
  const auto tok_path = dir / "tokenizer.json";
  if (!std::filesystem::exists(tok_path)) {
    notes.push_back("warning: no tokenizer.json in " + dir.string() + "; the GGUF has no vocabulary");
    return {};
  }
  const std::string where = tok_path.string();
  CERA_ASSIGN_OR_RETURN(const JsonValue tok, format::read_json_file(where));
  JsonValue tc = JsonValue::make_object({});
  const auto tc_path = dir / "tokenizer_config.json";
  const bool has_tc = std::filesystem::exists(tc_path);
  if (has_tc) {
    CERA_ASSIGN_OR_RETURN(tc, format::read_json_file(tc_path.string()));
  }

  const JsonValue* model = tok.find("model");
  const JsonValue* mtype = model ? model->find("type") : nullptr;
  if (!mtype || !mtype->as_string()) return not_found(where + ": missing key 'model.type'");
  const std::string& kind = *mtype->as_string();
  const bool byte_fallback = model->find("byte_fallback") && model->find("byte_fallback")->as_bool().value_or(false);
  const bool spm = kind == "Unigram" || (kind == "BPE" && byte_fallback);
  if (kind != "Unigram" && kind != "BPE") return unsupported(where + ": tokenizer model type '" + kind + "' (supported: BPE, Unigram)");

  const uint32_t n = config.n_vocab;
  Vocab v{std::vector<std::string>(n), std::vector<float>(n, 0.0f), std::vector<int32_t>(n, 0), std::vector<bool>(n, false)};
  const JsonValue* vocab = model->find("vocab");
  std::optional<int64_t> unk_id;
  if (kind == "Unigram") {
    if (!vocab || !vocab->is_array()) return not_found(where + ": Unigram model has no 'vocab' list");
    if (const JsonValue* u = model->find("unk_id")) unk_id = u->as_int();
    int64_t id = 0;
    for (const JsonValue& e : *vocab->as_array()) {
      if (!e.is_array() || e.size() != 2 || !(*e.as_array())[0].as_string() || !(*e.as_array())[1].as_double()) {
        return invalid_argument(where + ": vocab entry " + std::to_string(id) + " is not [piece, score]");
      }
      const std::string& piece = *(*e.as_array())[0].as_string();
      const TokenType type = unk_id && *unk_id == id ? TokenType::kUnknown
                             : is_byte_token(piece)  ? TokenType::kByte
                                                     : TokenType::kNormal;
      CERA_RETURN_IF_ERROR(put(v, id, piece, static_cast<float>(*(*e.as_array())[1].as_double()), type, where));
      ++id;
    }
  } else {
    if (!vocab || !vocab->is_object()) return not_found(where + ": BPE model has no 'vocab' object");
    const std::optional<std::string> unk = token_text(model->find("unk_token"));
    for (const auto& [text, idv] : *vocab->as_object()) {
      const auto id = idv.as_int();
      if (!id) return invalid_argument(where + ": vocab id of '" + text + "' is not an integer");
      TokenType type = TokenType::kNormal;
      if (spm && unk && text == *unk) type = TokenType::kUnknown;
      else if (spm && is_byte_token(text)) type = TokenType::kByte;
      const float score = spm && type == TokenType::kNormal ? -static_cast<float>(*id) : 0.0f;
      CERA_RETURN_IF_ERROR(put(v, *id, text, score, type, where));
    }
  }
  // Added tokens override the base entries with their types (control vs user-defined).
  std::map<std::string, int64_t> added_ids;
  if (const JsonValue* added = tok.find("added_tokens"); added && added->is_array()) {
    for (const JsonValue& a : *added->as_array()) {
      const auto id = a.find("id") ? a.find("id")->as_int() : std::nullopt;
      const auto text = token_text(&a);
      if (!id || !text) return invalid_argument(where + ": an added_tokens entry lacks 'id' or 'content'");
      const bool special = a.find("special") && a.find("special")->as_bool().value_or(false);
      TokenType type = special || looks_special(*text) ? TokenType::kControl : TokenType::kUserDefined;
      if (spm && unk_id && *unk_id == *id) type = TokenType::kUnknown;
      CERA_RETURN_IF_ERROR(put(v, *id, *text, 0.0f, type, where));
      added_ids.emplace(*text, *id);
    }
  }
  uint32_t padded = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (v.set[i]) continue;
    v.tokens[i] = "[PAD" + std::to_string(i) + "]";
    v.types[i] = static_cast<int32_t>(TokenType::kUnused);
    ++padded;
  }
  if (padded) notes.push_back(std::to_string(padded) + " unused ids up to vocab_size written as [PADn]");

  if (spm) {
    w.set_string("tokenizer.ggml.model", "llama");
    w.set_string("tokenizer.ggml.pre", "default");
  } else {
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", detect_bpe_pre(tok, notes));
  }
  w.set_array("tokenizer.ggml.tokens", format::GgufArray::of_strings(std::move(v.tokens)));
  if (spm) w.set_array("tokenizer.ggml.scores", format::GgufArray::of<float>(v.scores));
  w.set_array("tokenizer.ggml.token_type", format::GgufArray::of<int32_t>(v.types));
  if (!spm) {
    CERA_ASSIGN_OR_RETURN(std::vector<std::string> merges, read_merges(*model, where));
    w.set_array("tokenizer.ggml.merges", format::GgufArray::of_strings(std::move(merges)));
  }

  // Special ids: tokenizer_config.json text -> added token id, then config.json ids.
  struct Special {
    const char* name;  // tokenizer_config "<name>_token", GGUF "tokenizer.ggml.<gguf>_token_id"
    const char* gguf;
    std::optional<int64_t> from_config;
  };
  const Special specials[] = {{"bos", "bos", config.bos_token_id},
                              {"eos", "eos", config.eos_token_id},
                              {"unk", "unknown", std::nullopt},
                              {"sep", "seperator", std::nullopt},  // sic: llama.cpp's key spelling
                              {"pad", "padding", config.pad_token_id}};
  std::map<std::string, std::string> special_text;
  for (const Special& s : specials) {
    std::optional<int64_t> id;
    if (auto text = token_text(tc.find(std::string(s.name) + "_token"))) {
      special_text[s.name] = *text;
      if (auto it = added_ids.find(*text); it != added_ids.end()) id = it->second;
    }
    if (!id && std::string(s.name) == "unk" && unk_id) id = unk_id;
    if (!id) id = s.from_config;
    if (id && *id >= 0 && *id < n) w.set_u32(std::string("tokenizer.ggml.") + s.gguf + "_token_id", static_cast<uint32_t>(*id));
  }
  // add_bos/add_eos: the post-processor's template, overridden by tokenizer_config.json.
  std::optional<bool> add_bos, add_eos;
  if (const JsonValue* pp = tok.find("post_processor"); pp && pp->is_object()) {
    std::vector<const JsonValue*> procs{pp};
    if (const JsonValue* list = pp->find("processors"); list && list->is_array()) {
      procs.clear();
      for (const JsonValue& p : *list->as_array()) procs.push_back(&p);
    }
    for (const JsonValue* p : procs) {
      const JsonValue* type = p->find("type");
      const JsonValue* single = p->find("single");
      if (!type || !type->as_string() || *type->as_string() != "TemplateProcessing" || !single || !single->is_array()) continue;
      const auto& items = *single->as_array();
      auto special_id = [](const JsonValue& item) -> std::optional<std::string> {
        const JsonValue* st = item.find("SpecialToken");
        if (!st || !st->find("id") || !st->find("id")->as_string()) return std::nullopt;
        return *st->find("id")->as_string();
      };
      if (items.size() > 1) {
        const auto first = special_id(items.front()), last = special_id(items.back());
        if (first) add_bos = !special_text.count("bos") || special_text["bos"] == *first;
        if (last) add_eos = !special_text.count("eos") || special_text["eos"] == *last;
      }
    }
  }
  if (const JsonValue* b = tc.find("add_bos_token"); b && b->as_bool()) add_bos = *b->as_bool();
  if (const JsonValue* e = tc.find("add_eos_token"); e && e->as_bool()) add_eos = *e->as_bool();
  if (add_bos) w.set_bool("tokenizer.ggml.add_bos_token", *add_bos);
  if (add_eos) w.set_bool("tokenizer.ggml.add_eos_token", *add_eos);
  if (arch_info(config.arch).writes_vocab_size) {
    if (const JsonValue* p = tc.find("add_prefix_space"); p && p->as_bool()) {
      w.set_bool("tokenizer.ggml.add_space_prefix", *p->as_bool());
    }
  }

  // Chat template: tokenizer_config.json, else chat_template.jinja (transformers 5 writes that).
  std::optional<std::string> tmpl;
  if (const JsonValue* t = tc.find("chat_template")) {
    if (t->as_string()) {
      tmpl = *t->as_string();
    } else if (t->is_array()) {
      for (const JsonValue& e : *t->as_array()) {
        const JsonValue* name = e.find("name");
        if (name && name->as_string() && *name->as_string() == "default" && e.find("template")) {
          if (e.find("template")->as_string()) tmpl = *e.find("template")->as_string();
        }
      }
    }
  }
  if (!tmpl && std::filesystem::exists(dir / "chat_template.jinja")) {
    CERA_ASSIGN_OR_RETURN(std::string text, read_text(dir / "chat_template.jinja"));
    tmpl = std::move(text);
  }
  if (tmpl) w.set_string("tokenizer.chat_template", *tmpl);
  return {};
}

}  // namespace cera::convert
