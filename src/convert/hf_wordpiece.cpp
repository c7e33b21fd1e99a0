// WordPiece (BERT) vocabularies to tokenizer model "bert", as llama.cpp's BertModel.set_vocab
// writes them: "phantom space" texts (a word-initial piece gets U+2581 in front, a "##" piece
// loses its "##", [BRACKETED] specials stay), which is what src/tokenizer/wordpiece.cpp matches.
// Decision: a normalizer or pre-tokenizer other than BERT's own is refused, not approximated.
#include <map>
#include <optional>

#include "convert/hf_tokenizer.h"
#include "core/read_file.h"

namespace cera::convert {
namespace {

constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581
constexpr int64_t kMaxInputCharsPerWord = 100;          // tokenizer::WordPieceEncoder::kMaxWordChars

std::string phantom(const std::string& t) {
  if (t.size() >= 2 && t.front() == '[' && t.back() == ']') return t;
  if (t.rfind("##", 0) == 0) return t.substr(2);
  return std::string(kWordStart) + t;
}

std::optional<std::string> text_of(const JsonValue* entry) {
  if (!entry) return std::nullopt;
  if (entry->as_string()) return *entry->as_string();
  if (const JsonValue* c = entry->find("content"); c && c->as_string()) return *c->as_string();
  return std::nullopt;
}

struct WordPiece {
  std::vector<std::string> tokens;  // HF texts, by id
  std::vector<int32_t> types;
  std::vector<bool> set;
  bool lowercase = true;
  std::optional<bool> strip_accents;  // absent: follows lowercase (BertNormalizer's null)
  std::optional<bool> add_cls, add_sep;
};

Status put(WordPiece& v, int64_t id, const std::string& text, TokenType type, const std::string& where) {
  if (id < 0 || static_cast<uint64_t>(id) >= v.tokens.size()) {
    return out_of_range(where + ": token '" + text + "' has id " + std::to_string(id) + ", outside the vocabulary of " +
                        std::to_string(v.tokens.size()) + " (config.json vocab_size)");
  }
  v.tokens[id] = text;
  v.types[id] = static_cast<int32_t>(type);
  v.set[id] = true;
  return {};
}

Status read_tokenizer_json(const JsonValue& tok, const std::string& where, WordPiece& v) {
  const JsonValue* model = tok.find("model");
  const JsonValue* type = model ? model->find("type") : nullptr;
  if (!type || !type->as_string() || *type->as_string() != "WordPiece") {
    return unsupported(where + ": 'model.type' must be 'WordPiece' for a bert checkpoint");
  }
  if (const auto prefix = text_of(model->find("continuing_subword_prefix")); prefix && *prefix != "##") {
    return unsupported(where + ": 'model.continuing_subword_prefix' is '" + *prefix + "' (cera's WordPiece uses '##')");
  }
  if (const JsonValue* m = model->find("max_input_chars_per_word"); m && m->as_int() && *m->as_int() != kMaxInputCharsPerWord) {
    return unsupported(where + ": 'model.max_input_chars_per_word' is " + std::to_string(*m->as_int()) + " (cera uses 100)");
  }
  const JsonValue* vocab = model->find("vocab");
  if (!vocab || !vocab->is_object()) return not_found(where + ": WordPiece model has no 'vocab' object");
  for (const auto& [text, idv] : *vocab->as_object()) {
    const auto id = idv.as_int();
    if (!id) return invalid_argument(where + ": vocab id of '" + text + "' is not an integer");
    CERA_RETURN_IF_ERROR(put(v, *id, text, TokenType::kNormal, where));
  }
  if (const JsonValue* added = tok.find("added_tokens"); added && added->is_array()) {
    for (const JsonValue& a : *added->as_array()) {
      const auto id = a.find("id") ? a.find("id")->as_int() : std::nullopt;
      const auto text = text_of(&a);
      if (!id || !text) return invalid_argument(where + ": an added_tokens entry lacks 'id' or 'content'");
      const bool special = a.find("special") && a.find("special")->as_bool().value_or(false);
      CERA_RETURN_IF_ERROR(put(v, *id, *text, special ? TokenType::kControl : TokenType::kUserDefined, where));
    }
  }
  // BertNormalizer: clean_text and handle_chinese_chars are what cera always does.
  const JsonValue* norm = tok.find("normalizer");
  if (norm && !norm->is_null()) {
    const JsonValue* nt = norm->find("type");
    if (!nt || !nt->as_string() || *nt->as_string() != "BertNormalizer") {
      return unsupported(where + ": 'normalizer' must be a BertNormalizer (or null) for a bert checkpoint");
    }
    for (const char* key : {"clean_text", "handle_chinese_chars"}) {
      const JsonValue* f = norm->find(key);
      if (f && f->as_bool() && !*f->as_bool()) {
        return unsupported(where + ": normalizer '" + key + "' is false; cera's BERT normalizer always applies it");
      }
    }
    if (const JsonValue* l = norm->find("lowercase"); l && l->as_bool()) v.lowercase = *l->as_bool();
    if (const JsonValue* s = norm->find("strip_accents"); s && s->as_bool()) v.strip_accents = *s->as_bool();
  } else {
    v.lowercase = false;  // no normalizer: the text is matched as written
    v.strip_accents = false;
  }
  const JsonValue* pre = tok.find("pre_tokenizer");
  const JsonValue* pt = pre ? pre->find("type") : nullptr;
  if (!pt || !pt->as_string() || *pt->as_string() != "BertPreTokenizer") {
    return unsupported(where + ": 'pre_tokenizer' must be a BertPreTokenizer for a bert checkpoint");
  }
  // Post-processor: [CLS] $A [SEP] (TemplateProcessing or BertProcessing) adds both.
  if (const JsonValue* pp = tok.find("post_processor"); pp && pp->is_object()) {
    const JsonValue* ppt = pp->find("type");
    const std::string kind = ppt && ppt->as_string() ? *ppt->as_string() : "";
    if (kind == "BertProcessing") {
      v.add_cls = v.add_sep = true;
    } else if (kind == "TemplateProcessing" && pp->find("single") && pp->find("single")->is_array()) {
      const auto& items = *pp->find("single")->as_array();
      auto special = [](const JsonValue& item) -> std::optional<std::string> {
        const JsonValue* st = item.find("SpecialToken");
        return st ? text_of(st->find("id")) : std::nullopt;
      };
      v.add_cls = !items.empty() && special(items.front()).has_value();
      v.add_sep = items.size() > 1 && special(items.back()).has_value();
    } else {
      return unsupported(where + ": post_processor type '" + kind + "' (supported: TemplateProcessing, BertProcessing)");
    }
  }
  return {};
}

// vocab.txt: one token per line, the line number is the id.
Status read_vocab_txt(const std::filesystem::path& path, WordPiece& v) {
  CERA_ASSIGN_OR_RETURN(const std::string text, read_file(path, uint64_t{64} << 20));
  int64_t id = 0;
  for (size_t at = 0; at < text.size(); ++id) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string t = text.substr(at, end - at);
    if (!t.empty() && t.back() == '\r') t.pop_back();
    CERA_RETURN_IF_ERROR(put(v, id, t, TokenType::kNormal, path.string()));
    at = end + 1;
  }
  return {};
}

}  // namespace

Status add_wordpiece_tokenizer(const std::filesystem::path& dir, const HfConfig& config, format::GgufWriter& w,
                               std::vector<std::string>& notes) {
  const uint32_t n = config.n_vocab;
  WordPiece v{std::vector<std::string>(n), std::vector<int32_t>(n, 0), std::vector<bool>(n, false)};
  JsonValue tc = JsonValue::make_object({});
  if (const auto tc_path = dir / "tokenizer_config.json"; std::filesystem::exists(tc_path)) {
    CERA_ASSIGN_OR_RETURN(tc, format::read_json_file(tc_path.string()));
  }
  const auto tok_path = dir / "tokenizer.json";
  if (std::filesystem::exists(tok_path)) {
    CERA_ASSIGN_OR_RETURN(const JsonValue tok, format::read_json_file(tok_path.string()));
    CERA_RETURN_IF_ERROR(read_tokenizer_json(tok, tok_path.string(), v));
  } else if (std::filesystem::exists(dir / "vocab.txt")) {
    CERA_RETURN_IF_ERROR(read_vocab_txt(dir / "vocab.txt", v));
    if (const JsonValue* l = tc.find("do_lower_case"); l && l->as_bool()) v.lowercase = *l->as_bool();
    if (const JsonValue* s = tc.find("strip_accents"); s && s->as_bool()) v.strip_accents = *s->as_bool();
    notes.push_back("no tokenizer.json: WordPiece vocabulary from vocab.txt, flags from tokenizer_config.json");
  } else {
    return not_found(dir.string() + ": a bert checkpoint needs tokenizer.json or vocab.txt");
  }

  // Special tokens: tokenizer_config.json's texts, else BERT's bracketed defaults.
  struct Special {
    const char* name;  // tokenizer_config "<name>_token"
    const char* gguf;  // tokenizer.ggml.<gguf>_token_id
    const char* fallback;
  };
  const Special specials[] = {{"unk", "unknown", "[UNK]"}, {"cls", "cls", "[CLS]"}, {"sep", "seperator", "[SEP]"},
                              {"pad", "padding", "[PAD]"}, {"mask", "mask", "[MASK]"}};  // sic: llama.cpp's "seperator"
  std::map<std::string, uint32_t> by_text;
  for (uint32_t i = 0; i < n; ++i) {
    if (v.set[i]) by_text.emplace(v.tokens[i], i);
  }
  for (const Special& s : specials) {
    const std::string text = text_of(tc.find(std::string(s.name) + "_token")).value_or(s.fallback);
    const auto it = by_text.find(text);
    if (it == by_text.end()) {
      notes.push_back(std::string("warning: no ") + s.name + " token '" + text + "' in the vocabulary");
      continue;
    }
    w.set_u32(std::string("tokenizer.ggml.") + s.gguf + "_token_id", it->second);
    if (v.types[it->second] == static_cast<int32_t>(TokenType::kNormal)) v.types[it->second] = static_cast<int32_t>(TokenType::kControl);
  }

  std::map<std::string, uint32_t> seen;
  uint32_t padded = 0;
  for (uint32_t i = 0; i < n; ++i) {
    if (!v.set[i]) {
      v.tokens[i] = "[PAD" + std::to_string(i) + "]";
      v.types[i] = static_cast<int32_t>(TokenType::kUnused);
      ++padded;
    } else {
      const std::string hf = v.tokens[i];
      v.tokens[i] = phantom(hf);
      if (v.tokens[i].empty()) continue;  // "##" alone: can never match, as vocab.cpp skips empty texts
      const auto [it, fresh] = seen.emplace(v.tokens[i], i);
      if (!fresh) {
        return invalid_argument(dir.string() + ": tokens " + std::to_string(it->second) + " and " + std::to_string(i) +
                                " both become '" + v.tokens[i] + "' in the phantom-space vocabulary");
      }
    }
  }
  if (padded) notes.push_back(std::to_string(padded) + " unused ids up to vocab_size written as [PADn]");

  w.set_string("tokenizer.ggml.model", "bert");
  w.set_string("tokenizer.ggml.pre", "default");
  w.set_array("tokenizer.ggml.tokens", format::GgufArray::of_strings(std::move(v.tokens)));
  w.set_array("tokenizer.ggml.token_type", format::GgufArray::of<int32_t>(v.types));
  w.set_bool("tokenizer.ggml.normalizer.lowercase", v.lowercase);
  w.set_bool("tokenizer.ggml.normalizer.strip_accents", v.strip_accents.value_or(v.lowercase));
  w.set_bool("tokenizer.ggml.add_bos_token", v.add_cls.value_or(true));  // [CLS] is bos for bert
  w.set_bool("tokenizer.ggml.add_sep_token", v.add_sep.value_or(true));
  return {};
}

}  // namespace cera::convert
