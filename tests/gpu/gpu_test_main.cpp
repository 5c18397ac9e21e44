// The gpu test binary's main: exit code 77 (reported by ctest as skipped) where no CUDA device is found.
#include <gtest/gtest.h>

#include <cstdio>

#include "backends/cuda/device.h"

int main(int argc, char** argv) {
  if (kiln::cuda::DeviceCount() == 0) {
    std::printf("no CUDA device found: the gpu tests are skipped\n");
    return 77;
  }
  auto info = kiln::cuda::GetDeviceInfo(0);
  if (info.ok()) std::printf("device: %s\n", info->ToString().c_str());
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
