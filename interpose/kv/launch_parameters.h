// A kernel launch's parameters read as the driver lays them out, for what they reach (policy/kernel_arguments.h).
#pragma once

#include <cuda.h>

#include <string>
#include <vector>

#include "policy/kernel_arguments.h"

namespace kvremap::interpose {

// A launch as the hook received it: cuLaunchKernel's (or cuLaunchKernelEx's) function and its parameters,
// either `params` (one pointer per parameter) or `extra` (one buffer in the device-side layout).
struct KernelLaunch {
  CUfunction function = nullptr;
  void** params = nullptr;
  void** extra = nullptr;
};

// The launch's parameters, each a view of the caller's bytes (valid for the hook's duration).
struct LaunchParameters {
  bool known = false;  // false: the driver could not describe the kernel; nothing can be said of its reach
  std::vector<policy::KernelParameter> parameters;
};
LaunchParameters read_launch_parameters(const KernelLaunch& launch);

}  // namespace kvremap::interpose
