// Tokenizer: ties the vocabulary, the special-token partition, the model's encoder and the
// piece table together. The encoder is a variant chosen once at load, so encode() dispatches
// with one switch and no virtual calls per fragment.
#include "tokenizer/tokenizer.h"

#include <algorithm>
#include <variant>

#include "core/check.h"
#include "tokenizer/bpe.h"
#include "tokenizer/decoder.h"
#include "tokenizer/special_tokens.h"
#include "tokenizer/spm.h"
#include "tokenizer/unicode/unicode.h"
#include "tokenizer/wordpiece.h"

namespace cera::tokenizer {

struct Tokenizer::State {
  State(Vocab v, std::variant<SpmEncoder, BpeEncoder, WordPieceEncoder> e)
      : vocab(std::move(v)), encoder(std::move(e)), special(vocab), pieces(vocab) {}

  Vocab vocab;
  std::variant<SpmEncoder, BpeEncoder, WordPieceEncoder> encoder;
  SpecialTokenMatcher special;
  PieceTable pieces;
};

Result<Tokenizer> Tokenizer::from_gguf(const format::GgufFile& file) {
  CERA_ASSIGN_OR_RETURN(Vocab vocab, Vocab::from_gguf(file));
  std::variant<SpmEncoder, BpeEncoder, WordPieceEncoder> encoder = WordPieceEncoder{};
  switch (vocab.kind()) {
    case ModelKind::kSpm:
      encoder = SpmEncoder(vocab);
      break;
    case ModelKind::kBpe: {
      CERA_ASSIGN_OR_RETURN(BpeEncoder bpe, BpeEncoder::from_gguf(file, vocab));
      encoder = std::move(bpe);
      break;
    }
    case ModelKind::kWordPiece:
      break;
  }
  return Tokenizer(std::make_shared<const State>(std::move(vocab), std::move(encoder)));
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  encode(text, options, out);
  return out;
}

void Tokenizer::encode(std::string_view text, const EncodeOptions& options,
                       std::vector<int32_t>& out) const {
  CERA_CHECK_MSG(text.size() < (size_t{1} << 32), "encode: text of 4 GiB or more");
  const State& s = *state_;
  const Vocab& vocab = s.vocab;
  const VocabFlags& flags = vocab.flags();
  const SpecialIds& ids = vocab.special();
  out.reserve(out.size() + text.size() / 3 + 4);

  if (options.add_special && flags.add_bos) {
    out.push_back(vocab.kind() == ModelKind::kWordPiece ? ids.cls : ids.bos);
  }

  std::vector<Fragment> fragments;
  s.special.partition(vocab, text, options.parse_special, options.plain_ranges, fragments);
  bool after_special = true;  // SPM puts its space prefix at the start and after special tokens
  for (const Fragment& f : fragments) {
    if (f.token != kNoToken) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    const std::string_view piece = text.substr(f.offset, f.length);
    switch (vocab.kind()) {
      case ModelKind::kSpm:
        std::get<SpmEncoder>(s.encoder).encode(vocab, piece, flags.add_space_prefix && after_special, out);
        break;
      case ModelKind::kBpe:
        std::get<BpeEncoder>(s.encoder).encode(vocab, piece, out);
        break;
      case ModelKind::kWordPiece:
        std::get<WordPieceEncoder>(s.encoder).encode(vocab, piece, out);
        break;
    }
    after_special = false;
  }

  if (options.add_special && flags.add_eos) out.push_back(ids.eos);
  if (options.add_special && flags.add_sep && vocab.kind() == ModelKind::kWordPiece) {
    out.push_back(ids.sep);
  }
}

std::string Tokenizer::decode(std::span<const int32_t> ids, const DecodeOptions& options) const {
  const State& s = *state_;
  std::string out;
  DecodeCursor cursor;
  for (int32_t id : ids) append_token_text(s.vocab, s.pieces, id, options, cursor, out);
  return out;
}

std::string_view Tokenizer::token_piece(int32_t id, bool render_special) const {
  if (!state_->vocab.valid_id(id)) return {};
  return state_->pieces.piece(state_->vocab, id, render_special);
}

std::string_view Tokenizer::token_text(int32_t id) const {
  return state_->vocab.valid_id(id) ? state_->vocab.text(id) : std::string_view{};
}

int32_t Tokenizer::n_vocab() const { return state_->vocab.n_tokens(); }

std::vector<std::string_view> Tokenizer::control_texts() const {
  const Vocab& vocab = state_->vocab;
  std::vector<std::string_view> out;
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    const TokenType t = vocab.type(id);
    if ((t == TokenType::kControl || t == TokenType::kUnknown) && !vocab.text(id).empty()) out.push_back(vocab.text(id));
  }
  return out;
}
ModelKind Tokenizer::kind() const { return state_->vocab.kind(); }
int32_t Tokenizer::bos() const {
  const SpecialIds& ids = state_->vocab.special();
  return state_->vocab.kind() == ModelKind::kWordPiece ? ids.cls : ids.bos;
}
int32_t Tokenizer::eos() const { return state_->vocab.special().eos; }
int32_t Tokenizer::eot() const { return state_->vocab.special().eot; }
bool Tokenizer::is_end_of_generation(int32_t id) const {
  const auto& eog = state_->vocab.end_of_generation();
  return std::binary_search(eog.begin(), eog.end(), id);
}
const Vocab& Tokenizer::vocab() const { return state_->vocab; }

StreamDecoder::StreamDecoder(Tokenizer tokenizer, DecodeOptions options)
    : tokenizer_(std::move(tokenizer)), options_(options) {}

void StreamDecoder::push(int32_t id, std::string& out) {
  const Tokenizer::State& s = *tokenizer_.state_;
  DecodeCursor cursor{strip_next_space_};
  append_token_text(s.vocab, s.pieces, id, options_, cursor, pending_);
  strip_next_space_ = cursor.strip_next_space;
  const size_t complete = unicode::utf8_complete_prefix(pending_);
  out.append(pending_, 0, complete);
  pending_.erase(0, complete);
}

void StreamDecoder::finish(std::string& out) {
  out.append(pending_);
  pending_.clear();
  strip_next_space_ = true;
}

}  // namespace cera::tokenizer
