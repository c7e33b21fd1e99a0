// Matchers for the one-class stages of regex sequences (DeepSeek, Falcon, StarCoder, default,
// Poro/Viking, Gemma 4 ...). The explicit character sets of the DeepSeek LLM regexes are kept
// as sorted code point ranges transcribed from the regex text.
#include <algorithm>
#include <iterator>

#include "tokenizer/pretokenize/matchers.h"

namespace cera::tokenizer::pretok {
namespace {

struct Range {
  uint32_t lo;
  uint32_t hi;
};

template <size_t N>
bool in_ranges(const Range (&ranges)[N], uint32_t c) {
  const Range* it = std::upper_bound(std::begin(ranges), std::end(ranges), c,
                                     [](uint32_t x, const Range& r) { return x < r.lo; });
  return it != std::begin(ranges) && c <= (it - 1)->hi;
}

// `\s?SET+`: an optional leading whitespace code point, then a run of the set. When the
// whitespace is itself in the set (U+3000 below) both readings give the same match.
template <typename InSet>
size_t optional_space_then_run(const CpText& t, size_t i, size_t end, InSet in_set) {
  auto pred = [&](size_t j) { return in_set(j); };
  if (t.has(i, kSpace) && i + 1 < end && in_set(i + 1)) return t.run(i + 1, end, pred);
  return in_set(i) ? t.run(i, end, pred) : i;
}

bool is_default_punct(uint32_t c, uint8_t cls, bool with_backtick) {
  if (cls & kPunct) return true;
  switch (c) {
    case '$':
    case '+':
    case '<':
    case '=':
    case '>':
    case '^':
    case '~':
    case '|':
      return true;
    case '`':
      return with_backtick;
    default:
      return false;
  }
}

// The letter set of the DeepSeek LLM regex `\s?[A-Za-zµÀ-ÖØ-öø-ƺ...𞤀-𞥃]+`
// (llama-vocab.cpp), transcribed to ranges from the regex text.
constexpr Range kDeepseekLetters[] = {
    {0x41, 0x5A},       {0x61, 0x7A},       {0xB5, 0xB5},       {0xC0, 0xD6},
    {0xD8, 0xF6},       {0xF8, 0x1BA},      {0x1BC, 0x1BF},     {0x1C4, 0x293},
    {0x295, 0x2AF},     {0x370, 0x373},     {0x376, 0x377},     {0x37B, 0x37D},
    {0x37F, 0x37F},     {0x386, 0x386},     {0x388, 0x38A},     {0x38C, 0x38C},
    {0x38E, 0x3A1},     {0x3A3, 0x3F5},     {0x3F7, 0x481},     {0x48A, 0x52F},
    {0x531, 0x556},     {0x10A0, 0x10C5},   {0x13A0, 0x13F5},   {0x13F8, 0x13FD},
    {0x1C90, 0x1CBA},   {0x1CBD, 0x1CBF},   {0x1D00, 0x1D2B},   {0x1D6B, 0x1D77},
    {0x1D79, 0x1D9A},   {0x1E00, 0x1F15},   {0x1F18, 0x1F1D},   {0x1F20, 0x1F45},
    {0x1F48, 0x1F4D},   {0x1F50, 0x1F57},   {0x1F59, 0x1F59},   {0x1F5B, 0x1F5B},
    {0x1F5D, 0x1F5D},   {0x1F5F, 0x1F7D},   {0x1F80, 0x1FB4},   {0x1FB6, 0x1FBC},
    {0x1FBE, 0x1FBE},   {0x1FC2, 0x1FC4},   {0x1FC6, 0x1FCC},   {0x1FD0, 0x1FD3},
    {0x1FD6, 0x1FDB},   {0x1FE0, 0x1FEC},   {0x1FF2, 0x1FF4},   {0x1FF6, 0x1FFC},
    {0x2102, 0x2102},   {0x2107, 0x2107},   {0x210A, 0x2113},   {0x2115, 0x2115},
    {0x2119, 0x211D},   {0x2124, 0x2124},   {0x2126, 0x2126},   {0x2128, 0x2128},
    {0x212A, 0x212D},   {0x212F, 0x2134},   {0x2139, 0x2139},   {0x213C, 0x213F},
    {0x2145, 0x2149},   {0x214E, 0x214E},   {0x2183, 0x2184},   {0x2C00, 0x2C7B},
    {0x2C7E, 0x2CE4},   {0x2CEB, 0x2CEE},   {0x2CF2, 0x2CF3},   {0xA640, 0xA66D},
    {0xA680, 0xA69B},   {0xA722, 0xA76F},   {0xA771, 0xA787},   {0xA78B, 0xA78E},
    {0xAB70, 0xABBF},   {0xFB00, 0xFB06},   {0xFB13, 0xFB17},   {0xFF21, 0xFF3A},
    {0xFF41, 0xFF5A},   {0x10400, 0x1044F}, {0x104B0, 0x104D3}, {0x104D8, 0x104FB},
    {0x10C80, 0x10CB2}, {0x10CC0, 0x10CF2}, {0x118A0, 0x118DF}, {0x1E900, 0x1E943},
};

// [!-/:-~！-／：-～‘-‟　-。]
constexpr Range kDeepseekPunct[] = {
    {0x21, 0x2F},     {0x3A, 0x7E},     {0x2018, 0x201F},
    {0x3000, 0x3002}, {0xFF01, 0xFF0F}, {0xFF1A, 0xFF5E},
};

bool is_ascii_digit(uint32_t c) {
  return c >= '0' && c <= '9';
}

}  // namespace

static size_t match_punct_run_default(const CpText& t, size_t i, size_t end) {
  return t.run(i, end, [&](size_t j) { return is_default_punct(t.cp[j], t.cls[j], false); });
}

static size_t match_punct_run_falcon(const CpText& t, size_t i, size_t end) {
  return t.run(i, end, [&](size_t j) { return is_default_punct(t.cp[j], t.cls[j], true); });
}

static size_t match_number(const CpText& t, size_t i, size_t /*end*/) {
  return t.has(i, kNumber) ? i + 1 : i;
}

static size_t match_numbers(const CpText& t, size_t i, size_t end) {
  return t.run_of(i, end, kNumber);
}

static size_t match_numbers_1_3(const CpText& t, size_t i, size_t end) {
  return t.run_of(i, std::min(end, i + 3), kNumber);
}

static size_t match_ascii_digit_triple(const CpText& t, size_t i, size_t end) {
  if (i + 3 > end) return i;
  const bool ok =
      is_ascii_digit(t.cp[i]) && is_ascii_digit(t.cp[i + 1]) && is_ascii_digit(t.cp[i + 2]);
  return ok ? i + 3 : i;
}

static size_t match_cr_or_lf(const CpText& t, size_t i, size_t /*end*/) {
  return t.is_crlf(i) ? i + 1 : i;
}

static size_t match_space_letters(const CpText& t, size_t i, size_t end) {
  return optional_space_then_run(t, i, end, [&](size_t j) { return t.has(j, kLetter); });
}

static size_t match_space_punct(const CpText& t, size_t i, size_t end) {
  return optional_space_then_run(t, i, end, [&](size_t j) { return t.has(j, kPunct); });
}

// [一-龥ࠀ-一가-퟿]: U+4E00..U+9FA5, U+0800..U+4E00, U+AC00..U+D7FF.
static size_t match_cjk_hangul_run(const CpText& t, size_t i, size_t end) {
  return t.run(i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return (c >= 0x800 && c <= 0x9FA5) || (c >= 0xAC00 && c <= 0xD7FF);
  });
}

// [一-龥぀-ゟ゠-ヿ]: U+4E00..U+9FA5, U+3040..U+30FF.
static size_t match_cjk_kana_run(const CpText& t, size_t i, size_t end) {
  return t.run(i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return (c >= 0x4E00 && c <= 0x9FA5) || (c >= 0x3040 && c <= 0x30FF);
  });
}

// Both sets start with their ASCII members; ASCII skips the binary search (2.5x on ASCII text).
static size_t match_deepseek_letters(const CpText& t, size_t i, size_t end) {
  return optional_space_then_run(t, i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return c < 0x80 ? (c | 0x20) - 'a' < 26 : in_ranges(kDeepseekLetters, c);
  });
}

static size_t match_deepseek_punct(const CpText& t, size_t i, size_t end) {
  return optional_space_then_run(t, i, end, [&](size_t j) {
    const uint32_t c = t.cp[j];
    return c < 0x80 ? (c >= 0x21 && c <= 0x7E && (c < '0' || c > '9'))
                    : in_ranges(kDeepseekPunct, c);
  });
}

// \s+$ : a whitespace run that reaches the piece end. (Python's `$` also matches before a
// final "\n", but "\n" is whitespace, so the run would have reached the end anyway.)
static size_t match_trailing_space(const CpText& t, size_t i, size_t end) {
  if (!t.has(i, kSpace)) return i;
  const size_t k = t.run_of(i, end, kSpace);
  return k == end ? k : i;
}

// ' ?[^(\s|.,!?…。，、।۔،)]+' : a bracket expression, so ( | ) are literal excluded characters.
static size_t match_poro(const CpText& t, size_t i, size_t end) {
  auto word = [&](size_t j) {
    if (t.has(j, kSpace)) return false;
    switch (t.cp[j]) {
      case '(':
      case '|':
      case ')':
      case '.':
      case ',':
      case '!':
      case '?':
      case 0x2026:
      case 0x3002:
      case 0xFF0C:
      case 0x3001:
      case 0x0964:
      case 0x06D4:
      case 0x060C:
        return false;
      default:
        return true;
    }
  };
  if (t.cp[i] == ' ' && i + 1 < end && word(i + 1)) return t.run(i + 1, end, word);
  return word(i) ? t.run(i, end, word) : i;
}

static size_t match_newline_runs(const CpText& t, size_t i, size_t end) {
  const bool newline = t.cp[i] == '\n';
  return t.run(i, end, [&](size_t j) { return (t.cp[j] == '\n') == newline; });
}

static size_t match_non_space_run(const CpText& t, size_t i, size_t end) {
  return t.run(i, end, [&](size_t j) { return !t.has(j, kSpace); });
}

// Stages: each instantiates the scan loop with its matcher inlined.
void stage_punct_run_default(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_punct_run_default>(t, in, out);
}
void stage_punct_run_falcon(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_punct_run_falcon>(t, in, out);
}
void stage_number(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_number>(t, in, out);
}
void stage_numbers(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_numbers>(t, in, out);
}
void stage_numbers_1_3(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_numbers_1_3>(t, in, out);
}
void stage_ascii_digit_triple(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_ascii_digit_triple>(t, in, out);
}
void stage_cr_or_lf(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_cr_or_lf>(t, in, out);
}
void stage_space_letters(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_space_letters>(t, in, out);
}
void stage_space_punct(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_space_punct>(t, in, out);
}
void stage_cjk_hangul_run(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_cjk_hangul_run>(t, in, out);
}
void stage_cjk_kana_run(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_cjk_kana_run>(t, in, out);
}
void stage_deepseek_letters(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_deepseek_letters>(t, in, out);
}
void stage_deepseek_punct(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_deepseek_punct>(t, in, out);
}
void stage_trailing_space(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_trailing_space>(t, in, out);
}
void stage_poro(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_poro>(t, in, out);
}
void stage_newline_runs(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_newline_runs>(t, in, out);
}
void stage_non_space_run(const CpText& t, const Pieces& in, Pieces& out) {
  run_stage<match_non_space_run>(t, in, out);
}

}  // namespace cera::tokenizer::pretok
