// A one-line progress bar on stderr for long loads and conversions; silent when stderr is not
// a terminal so logs and tests stay clean.
#pragma once

#include <cstdint>
#include <string>

namespace cera::cli {

class ProgressBar {
 public:
  explicit ProgressBar(std::string label);
  ~ProgressBar();  // finishes the line if anything was drawn
  void update(uint64_t done, uint64_t total);

 private:
  std::string label_;
  bool enabled_;
  int last_permille_ = -1;
};

}  // namespace cera::cli
