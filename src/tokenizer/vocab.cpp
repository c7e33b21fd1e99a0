// Loading and validating the tokenizer.ggml.* keys. This file is the one place where the file's
// strings (model names, pre-tokenizer names with their flags, end-of-generation texts) become
// enums and booleans; stricter than llama.cpp: out-of-range ids and bad lengths are errors.
#include "tokenizer/vocab.h"

#include <algorithm>
#include <array>
#include <limits>

namespace cera::tokenizer {
namespace {

constexpr std::string_view kKeyModel = "tokenizer.ggml.model";
constexpr std::string_view kKeyPre = "tokenizer.ggml.pre";
constexpr std::string_view kKeyTokens = "tokenizer.ggml.tokens";
constexpr std::string_view kKeyScores = "tokenizer.ggml.scores";
constexpr std::string_view kKeyTokenType = "tokenizer.ggml.token_type";
constexpr std::string_view kKeyAddBos = "tokenizer.ggml.add_bos_token";
constexpr std::string_view kKeyAddEos = "tokenizer.ggml.add_eos_token";
constexpr std::string_view kKeyAddSep = "tokenizer.ggml.add_sep_token";
constexpr std::string_view kKeyAddSpacePrefix = "tokenizer.ggml.add_space_prefix";
constexpr std::string_view kKeyLowercase = "tokenizer.ggml.normalizer.lowercase";
constexpr std::string_view kKeyStripAccents = "tokenizer.ggml.normalizer.strip_accents";
constexpr std::string_view kKeyBos = "tokenizer.ggml.bos_token_id";
constexpr std::string_view kKeyEos = "tokenizer.ggml.eos_token_id";

struct ModelName {
  std::string_view name;
  ModelKind kind;
};
constexpr std::array kModelNames = {
    ModelName{"llama", ModelKind::kSpm},
    ModelName{"gpt2", ModelKind::kBpe},
    ModelName{"bert", ModelKind::kWordPiece},
};

// BPE pre-tokenizer names whose reference tokenizer keeps a whole pre-token found in the vocab
// (HF `ignore_merges`) and, for the Llama 3 family, adds BOS by default. Every other name keeps
// the defaults (merges always applied, no BOS).
struct PreFlags {
  std::string_view name;
  bool ignore_merges;
  bool add_bos;
};
constexpr std::array kPreFlags = {
    PreFlags{"llama3", true, true},          PreFlags{"llama-v3", true, true},
    PreFlags{"llama-bpe", true, true},       PreFlags{"falcon3", true, true},
    PreFlags{"falcon-h1", true, true},       PreFlags{"pixtral", true, true},
    PreFlags{"midm-2.0", true, true},        PreFlags{"lfm2", true, true},
    PreFlags{"jina-v5-nano", true, true},    PreFlags{"tekken", true, true},
    PreFlags{"chameleon", false, true},      PreFlags{"minicpm5", true, false},
    PreFlags{"youtu", true, false},          PreFlags{"granite-embed-multi-97m", true, false},
};

// Texts of tokens that end generation even when the file names no eot/eom id (chat templates'
// end-of-turn markers). The first one present becomes eot when tokenizer.ggml.eot_token_id is absent.
constexpr std::array<std::string_view, 11> kEndOfGenerationTexts = {
    "<|eot_id|>", "<|im_end|>",      "<|end|>",   "<end_of_turn>",       "<|endoftext|>",
    "<|eom_id|>", "<|end_of_text|>", "<EOT>",     "<｜end▁of▁sentence｜>", "<|return|>",
    "<|call|>",
};

Status key_error(std::string_view key, const std::string& what) {
  return corrupt("'" + std::string(key) + "': " + what);
}

}  // namespace

std::string_view model_kind_name(ModelKind kind) {
  for (const auto& m : kModelNames) {
    if (m.kind == kind) return m.name;
  }
  return "?";
}

Result<Vocab> Vocab::from_gguf(const format::GgufFile& file) {
  Vocab v;
  if (!file.has(kKeyModel)) return not_found("'" + std::string(kKeyModel) + "' is missing: not a vocabulary");
  CERA_ASSIGN_OR_RETURN(std::string model, file.get<std::string>(kKeyModel));
  const auto* it = std::find_if(kModelNames.begin(), kModelNames.end(),
                                [&](const ModelName& m) { return m.name == model; });
  if (it == kModelNames.end()) {
    return unsupported("'" + std::string(kKeyModel) + "' = '" + model +
                       "': unknown tokenizer model (known: llama, gpt2, bert)");
  }
  v.kind_ = it->kind;
  CERA_ASSIGN_OR_RETURN(v.pre_, file.get_or<std::string>(kKeyPre, ""));
  CERA_RETURN_IF_ERROR(v.load_tokens(file));
  CERA_RETURN_IF_ERROR(v.load_special(file));
  CERA_RETURN_IF_ERROR(v.load_flags(file));
  v.find_end_of_generation();
  return v;
}

Status Vocab::load_tokens(const format::GgufFile& file) {
  if (!file.has(kKeyTokens)) return not_found("'" + std::string(kKeyTokens) + "' is missing");
  CERA_ASSIGN_OR_RETURN(std::vector<std::string> tokens, file.get_array<std::string>(kKeyTokens));
  if (tokens.empty()) return key_error(kKeyTokens, "the token list is empty");
  if (tokens.size() >= static_cast<size_t>(std::numeric_limits<int32_t>::max())) {
    return key_error(kKeyTokens, std::to_string(tokens.size()) + " tokens is more than int32 ids hold");
  }
  const size_t n = tokens.size();

  if (file.has(kKeyScores)) {
    CERA_ASSIGN_OR_RETURN(scores_, file.get_array<float>(kKeyScores));
    if (scores_.size() != n) {
      return key_error(kKeyScores, std::to_string(scores_.size()) + " scores for " +
                                       std::to_string(n) + " tokens");
    }
  }
  types_.assign(n, TokenType::kNormal);
  if (file.has(kKeyTokenType)) {
    CERA_ASSIGN_OR_RETURN(std::vector<int32_t> types, file.get_array<int32_t>(kKeyTokenType));
    if (types.size() != n) {
      return key_error(kKeyTokenType, std::to_string(types.size()) + " types for " +
                                          std::to_string(n) + " tokens");
    }
    for (size_t i = 0; i < n; ++i) {
      if (types[i] < 0 || types[i] > static_cast<int32_t>(TokenType::kByte)) {
        return key_error(kKeyTokenType, "token " + std::to_string(i) + " has type " +
                                            std::to_string(types[i]) + " (expected 0..6)");
      }
      types_[i] = static_cast<TokenType>(types[i]);
    }
  }

  size_t total = 0;
  for (const auto& t : tokens) total += t.size();
  texts_.resize(total);
  offsets_.resize(n + 1);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    offsets_[i] = at;
    std::copy(tokens[i].begin(), tokens[i].end(), texts_.begin() + static_cast<ptrdiff_t>(at));
    at += tokens[i].size();
    max_token_bytes_ = std::max(max_token_bytes_, tokens[i].size());
  }
  offsets_[n] = at;

  piece_to_id_.reserve(n);
  auto text_of = [this](int32_t id) { return text(id); };
  for (size_t i = 0; i < n; ++i) {
    const int32_t id = static_cast<int32_t>(i);
    if (offsets_[i + 1] == offsets_[i]) continue;  // an empty token can never be matched
    const int32_t earlier = piece_to_id_.insert(text(id), id, text_of);
    if (earlier != PieceMap::kAbsent) {
      return key_error(kKeyTokens, "duplicate token '" + std::string(text(id)) + "' at ids " +
                                       std::to_string(earlier) + " and " + std::to_string(i));
    }
  }
  return ok_status();
}

Status Vocab::load_special(const format::GgufFile& file) {
  // Defaults the reference tokenizers assume when a key is absent: SentencePiece's fixed
  // <unk>=0, <s>=1, </s>=2, and BERT's bracketed names.
  if (kind_ == ModelKind::kSpm) {
    special_.unk = 0;
    special_.bos = n_tokens() > 1 ? 1 : kNoToken;
    special_.eos = n_tokens() > 2 ? 2 : kNoToken;
  } else if (kind_ == ModelKind::kWordPiece) {
    special_.unk = find("[UNK]");
    special_.cls = find("[CLS]");
    special_.sep = find("[SEP]");
    special_.pad = find("[PAD]");
    special_.mask = find("[MASK]");
  }

  struct IdKey {
    std::string_view key;
    int32_t* id;
  };
  const std::array keys = {
      IdKey{kKeyBos, &special_.bos},
      IdKey{kKeyEos, &special_.eos},
      IdKey{"tokenizer.ggml.eot_token_id", &special_.eot},
      IdKey{"tokenizer.ggml.eom_token_id", &special_.eom},
      IdKey{"tokenizer.ggml.unknown_token_id", &special_.unk},
      IdKey{"tokenizer.ggml.padding_token_id", &special_.pad},
      IdKey{"tokenizer.ggml.seperator_token_id", &special_.sep},  // sic: gguf-py's spelling
      IdKey{"tokenizer.ggml.cls_token_id", &special_.cls},
      IdKey{"tokenizer.ggml.mask_token_id", &special_.mask},
  };
  for (const auto& k : keys) {
    const format::GgufValue* value = file.find(k.key);
    if (value == nullptr) continue;
    const std::optional<int64_t> id = value->as_int();
    if (!id) return key_error(k.key, "expected an integer token id");
    if (*id < 0 || *id >= n_tokens()) {
      return key_error(k.key, "token id " + std::to_string(*id) + " is outside the vocabulary of " +
                                  std::to_string(n_tokens()) + " tokens");
    }
    *k.id = static_cast<int32_t>(*id);
  }
  // BERT files written by llama.cpp's converter carry [CLS] as bos; either name serves.
  if (kind_ == ModelKind::kWordPiece) {
    if (special_.cls == kNoToken) special_.cls = special_.bos;
    if (special_.bos == kNoToken) special_.bos = special_.cls;
  }
  return ok_status();
}

Status Vocab::load_flags(const format::GgufFile& file) {
  switch (kind_) {
    case ModelKind::kSpm:
      flags_.add_bos = true;
      flags_.add_space_prefix = true;
      break;
    case ModelKind::kBpe:
      for (const auto& p : kPreFlags) {
        if (p.name == pre_) {
          flags_.ignore_merges = p.ignore_merges;
          flags_.add_bos = p.add_bos;
        }
      }
      break;
    case ModelKind::kWordPiece:
      flags_.add_bos = true;
      flags_.add_sep = true;
      flags_.lowercase = true;
      break;
  }
  CERA_ASSIGN_OR_RETURN(flags_.add_bos, file.get_or<bool>(kKeyAddBos, flags_.add_bos));
  CERA_ASSIGN_OR_RETURN(flags_.add_eos, file.get_or<bool>(kKeyAddEos, flags_.add_eos));
  CERA_ASSIGN_OR_RETURN(flags_.add_sep, file.get_or<bool>(kKeyAddSep, flags_.add_sep));
  if (kind_ == ModelKind::kSpm) {
    CERA_ASSIGN_OR_RETURN(flags_.add_space_prefix,
                          file.get_or<bool>(kKeyAddSpacePrefix, flags_.add_space_prefix));
  }
  CERA_ASSIGN_OR_RETURN(flags_.lowercase, file.get_or<bool>(kKeyLowercase, flags_.lowercase));
  // BERT's normalizer strips accents exactly when it lowercases, unless told otherwise.
  CERA_ASSIGN_OR_RETURN(flags_.strip_accents, file.get_or<bool>(kKeyStripAccents, flags_.lowercase));

  if (flags_.add_bos && special_.bos == kNoToken) {
    return key_error(kKeyAddBos, "is true but '" + std::string(kKeyBos) + "' names no token");
  }
  if (flags_.add_eos && special_.eos == kNoToken) {
    return key_error(kKeyAddEos, "is true but '" + std::string(kKeyEos) + "' names no token");
  }
  if (flags_.add_sep && special_.sep == kNoToken) {
    return key_error(kKeyAddSep, "is true but 'tokenizer.ggml.seperator_token_id' names no token");
  }
  return ok_status();
}

void Vocab::find_end_of_generation() {
  if (special_.eot == kNoToken) {
    for (std::string_view t : kEndOfGenerationTexts) {
      if (int32_t id = find(t); id != kNoToken) {
        special_.eot = id;
        break;
      }
    }
  }
  auto add = [&](int32_t id) {
    if (id != kNoToken && std::find(eog_.begin(), eog_.end(), id) == eog_.end()) eog_.push_back(id);
  };
  add(special_.eos);
  add(special_.eot);
  add(special_.eom);
  for (std::string_view t : kEndOfGenerationTexts) add(find(t));
  std::sort(eog_.begin(), eog_.end());
}

}  // namespace cera::tokenizer
