// A test fixture holding one stories260K engine on the CPU for the whole suite (loading it per
// test would dominate the runtime tests), with a helper that opens sessions on it.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <utility>

#include "api/engine.h"
#include "stories_model.h"

namespace cera::test {

class StoriesEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto e = api::Engine::load({.model_path = stories_gguf(), .device = api::DeviceChoice::kCpu});
    ASSERT_TRUE(e.ok()) << e.status().to_string();
    engine_ = std::move(e).value().release();
  }
  static void TearDownTestSuite() {
    delete engine_;
    engine_ = nullptr;
  }
  static std::unique_ptr<runtime::Session> session(const runtime::SessionOptions& o) {
    auto s = engine_->new_session(o);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return std::move(s).value();
  }
  static model::Model& model() { return engine_->model(); }
  static const tokenizer::Tokenizer& tok() { return engine_->tokenizer(); }
  inline static api::Engine* engine_ = nullptr;
};

}  // namespace cera::test
