#include "progress.h"

#include <unistd.h>

#include <cstdio>

namespace cera::cli {

ProgressBar::ProgressBar(std::string label) : label_(std::move(label)), enabled_(::isatty(2) == 1) {}

ProgressBar::~ProgressBar() {
  if (enabled_ && last_permille_ >= 0) std::fputc('\n', stderr);
}

void ProgressBar::update(uint64_t done, uint64_t total) {
  if (!enabled_ || total == 0) return;
  const int permille = static_cast<int>(done * 1000 / total);
  if (permille == last_permille_) return;  // redraw only when the number changes
  last_permille_ = permille;
  constexpr int kWidth = 30;
  const int filled = permille * kWidth / 1000;
  std::fprintf(stderr, "\r%s [%.*s%*s] %5.1f%% (%.1f / %.1f MiB)", label_.c_str(), filled,
               "##############################", kWidth - filled, "", permille / 10.0,
               done / 1048576.0, total / 1048576.0);
  std::fflush(stderr);
}

}  // namespace cera::cli
