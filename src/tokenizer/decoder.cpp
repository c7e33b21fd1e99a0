// Building the piece table and appending tokens (see decoder.h). A BPE character outside the
// GPT-2 mapping is kept as its UTF-8 bytes rather than replaced, so nothing is silently lost.
#include "tokenizer/decoder.h"

#include "tokenizer/byte_map.h"
#include "tokenizer/unicode/unicode.h"

namespace cera::tokenizer {
namespace {

constexpr std::string_view kEscapedSpace = "\xE2\x96\x81";

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// "<0xAB>" -> 0xAB, or -1 when the text is not a byte token's spelling.
int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  const int hi = hex_digit(text[3]);
  const int lo = hex_digit(text[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

void append_unescaped(std::string_view text, std::string& out) {
  for (size_t at = 0; at < text.size();) {
    if (text.compare(at, kEscapedSpace.size(), kEscapedSpace) == 0) {
      out.push_back(' ');
      at += kEscapedSpace.size();
    } else {
      out.push_back(text[at++]);
    }
  }
}

void append_byte_level(std::string_view text, std::string& out) {
  for (size_t at = 0; at < text.size();) {
    const size_t start = at;
    const uint32_t cp = unicode::decode_utf8(text, at);
    const int byte = codepoint_to_byte(cp);
    if (byte >= 0) {
      out.push_back(static_cast<char>(byte));
    } else {
      out.append(text.substr(start, at - start));
    }
  }
}

}  // namespace

PieceTable::PieceTable(const Vocab& vocab) {
  std::string buf;
  offsets_.reserve(static_cast<size_t>(vocab.n_tokens()) + 1);
  for (int32_t id = 0; id < vocab.n_tokens(); ++id) {
    offsets_.push_back(buf.size());
    const std::string_view text = vocab.text(id);
    switch (vocab.type(id)) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;  // invisible (control/unknown can be rendered on request, see piece())
      case TokenType::kUserDefined:
        buf.append(text);
        break;
      case TokenType::kByte:
        if (const int b = parse_byte_token(text); b >= 0) {
          buf.push_back(static_cast<char>(b));
        } else {
          buf.append(text);
        }
        break;
      case TokenType::kNormal:
        if (vocab.kind() == ModelKind::kBpe) {
          append_byte_level(text, buf);
        } else {
          append_unescaped(text, buf);
        }
        break;
    }
  }
  offsets_.push_back(buf.size());
  bytes_.assign(buf.begin(), buf.end());
}

void append_token_text(const Vocab& vocab, const PieceTable& pieces, int32_t id,
                       const DecodeOptions& options, DecodeCursor& cursor, std::string& out) {
  if (!vocab.valid_id(id)) return;
  const bool prefixed = (vocab.kind() == ModelKind::kSpm && vocab.flags().add_space_prefix) ||
                        vocab.kind() == ModelKind::kWordPiece;
  std::string_view piece = pieces.piece(vocab, id, options.render_special);
  if (vocab.is_special(id)) {
    // Encoding puts a fresh space prefix after every special token; expect it next.
    cursor.strip_next_space = true;
    out.append(piece);
    return;
  }
  if (cursor.strip_next_space && prefixed && options.strip_space_prefix && !piece.empty() &&
      piece[0] == ' ') {
    piece.remove_prefix(1);
  }
  cursor.strip_next_space = false;
  out.append(piece);
}

}  // namespace cera::tokenizer
