// Reads a launch's parameters through the driver's parameter layout (cuFuncGetParamInfo).
#include "interpose/kv/launch_parameters.h"

#include <cstddef>
#include <span>

#include "interpose/driver/driver_api.h"

namespace kvremap::interpose {
namespace {

// cuLaunchKernel's `extra`: (key, value) pairs up to CU_LAUNCH_PARAM_END; the buffer and its size, or
// false when either is missing or a key is not one the driver documents.
bool extra_buffer(void** extra, const std::byte** buffer, std::size_t* size) {
  *buffer = nullptr;
  *size = 0;
  bool have_size = false;
  for (std::size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
    if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      *buffer = static_cast<const std::byte*>(extra[i + 1]);
    } else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      if (!extra[i + 1]) return false;
      *size = *static_cast<const std::size_t*>(extra[i + 1]);
      have_size = true;
    } else {
      return false;
    }
  }
  return *buffer != nullptr && have_size;
}

}  // namespace

LaunchParameters read_launch_parameters(const KernelLaunch& launch) {
  LaunchParameters out;
  const auto layout = real_parameter_layout(launch.function);
  if (!layout) return out;
  if (launch.params) {
    for (const ParamPlace& p : *layout) {
      const void* value = launch.params[&p - layout->data()];
      if (!value) return out;  // the driver refuses this launch itself
      out.parameters.push_back({p.offset, std::span(static_cast<const std::byte*>(value), p.size)});
    }
  } else if (launch.extra) {
    const std::byte* buffer = nullptr;
    std::size_t size = 0;
    if (!extra_buffer(launch.extra, &buffer, &size)) return out;
    for (const ParamPlace& p : *layout) {
      if (p.offset > size || p.size > size - p.offset) return out;
      out.parameters.push_back({p.offset, std::span(buffer + p.offset, p.size)});
    }
  } else if (!layout->empty()) {
    return out;  // parameters expected and none given: the driver refuses the launch
  }
  out.known = true;
  return out;
}

}  // namespace kvremap::interpose
