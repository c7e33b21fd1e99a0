// compile_gbnf with its cache, and ByteMatcher. The cache holds the last kCacheSize distinct
// grammars (least recently used goes first): requests of one deployment reuse a few schemas,
// and compilation (plus the token tables hung off a Grammar) is the cost worth sharing.
#include "runtime/grammar/grammar.h"

#include <list>
#include <mutex>
#include <string>
#include <utility>

#include "runtime/grammar/grammar_compile.h"

namespace cera::runtime::grammar {
namespace {

constexpr size_t kCacheSize = 32;

struct CacheEntry {
  std::string text;
  std::string root;
  std::shared_ptr<const Grammar> grammar;
};

std::mutex& cache_mutex() {
  static std::mutex m;
  return m;
}
std::list<CacheEntry>& cache() {
  static std::list<CacheEntry> c;
  return c;
}

}  // namespace

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text, std::string_view root,
                                                    const GrammarLimits& limits) {
  CERA_ASSIGN_OR_RETURN(GbnfAst ast, parse_gbnf(text, limits));
  return compile_ast(ast, root, limits);
}

Result<std::shared_ptr<const Grammar>> compile_gbnf(std::string_view text, std::string_view root) {
  {
    std::lock_guard<std::mutex> lock(cache_mutex());
    auto& c = cache();
    for (auto it = c.begin(); it != c.end(); ++it) {
      if (it->text == text && it->root == root) {
        c.splice(c.begin(), c, it);
        return c.front().grammar;
      }
    }
  }
  // Compiled outside the lock: a slow grammar must not hold up others. Two threads compiling
  // the same text at once both succeed; the second insert is dropped.
  CERA_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> g, compile_gbnf(text, root, GrammarLimits{}));
  std::lock_guard<std::mutex> lock(cache_mutex());
  auto& c = cache();
  for (const CacheEntry& e : c) {
    if (e.text == text && e.root == root) return e.grammar;
  }
  c.push_front({std::string(text), std::string(root), g});
  if (c.size() > kCacheSize) c.pop_back();
  return g;
}

ByteMatcher::ByteMatcher(std::shared_ptr<const Grammar> g) : g_(std::move(g)), stepper_(*g_) {
  stepper_.start(arena_, g_->rules()[g_->root()].start, kRootParent, current_);
}

bool ByteMatcher::accept(std::string_view bytes) {
  if (bytes.empty()) return true;
  const uint32_t checkpoint = arena_.size();
  saved_ = current_;
  for (unsigned char b : bytes) {
    stepper_.advance(arena_, current_, b, next_);
    std::swap(current_, next_);
    if (!current_.alive()) {
      current_ = saved_;
      arena_.truncate(checkpoint);
      return false;
    }
  }
  // Frames of past states are garbage; drop them once they clearly outnumber the live ones.
  if (arena_.size() > 4 * live_after_compact_ + 65536) {
    std::vector<uint32_t>* roots[] = {&current_.tops};
    arena_.compact(roots);
    live_after_compact_ = arena_.size();
  }
  return true;
}

}  // namespace cera::runtime::grammar
