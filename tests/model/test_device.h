// The device the model tests run on: CERA_TEST_DEVICE=cpu (the default) or cuda. A bad value is
// an error the test reports; asking for cuda in a build without it, or on a machine without a
// GPU, makes Engine::load fail, so the test FAILS with that message rather than skipping.
#pragma once

#include <cstdlib>
#include <string>

#include "api/engine.h"

namespace cera::test {

struct TestDevice {
  api::DeviceChoice choice = api::DeviceChoice::kCpu;
  std::string name = "cpu";
  std::string error;  // non-empty: CERA_TEST_DEVICE names no device
};

inline TestDevice test_device() {
  TestDevice d;
  const char* env = std::getenv("CERA_TEST_DEVICE");
  if (env == nullptr || env[0] == '\0') return d;
  d.name = env;
  const auto choice = api::device_choice_from_name(env);
  if (!choice || *choice == api::DeviceChoice::kAuto) {
    d.error = "CERA_TEST_DEVICE='" + d.name + "': expected cpu or cuda";
  } else {
    d.choice = *choice;
  }
  return d;
}

}  // namespace cera::test
