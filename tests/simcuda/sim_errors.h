// CUresult names and descriptions (cuGetErrorName/cuGetErrorString and SIMCUDA_FAIL parsing).
#pragma once

#include <cuda.h>

#include <string_view>

namespace simcuda {

const char* error_name(CUresult code);    // nullptr for an unknown code
const char* error_string(CUresult code);  // nullptr for an unknown code
bool error_by_name(std::string_view name, CUresult& out);

}  // namespace simcuda
