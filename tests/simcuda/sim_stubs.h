// The generated half of the export list: cuda.h's functions as weak NOT_SUPPORTED stubs, and their cuGetProcAddress ABIs.
#pragma once

#include <cstddef>

namespace simcuda {

struct StubEntry {
  const char* name;
  void* stub;      // the generated NOT_SUPPORTED body
  void* resolved;  // what the export resolved to at link time: the stub, or the simulator's real function
};

struct ProcEntry {
  const char* base;  // the name cuGetProcAddress is asked for
  int version;       // the CUDA version that introduced this ABI
  void* legacy;
  void* per_thread;  // the _ptds/_ptsz export, or nullptr
};

// Generated (sim_exports_generated.cpp): every function cuda.h declares, sorted by name.
extern const StubEntry kStubEntries[];
extern const std::size_t kStubEntryCount;
extern const ProcEntry kProcEntries[];
extern const std::size_t kProcEntryCount;

// The body of every stub: counts the call like any export, prints one line per function, returns
// CUDA_ERROR_NOT_SUPPORTED (as an int: the generated file does not include cuda.h).
int unsimulated_call(std::size_t index);

}  // namespace simcuda
