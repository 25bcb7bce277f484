// Canonical output for the conformance clients: one line per driver call, with addresses and handles named.
#pragma once

#include <cuda.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace conf {

// The result code's name as cuda.h spells it (cuGetErrorName), or "CUresult(N)" for a code it lacks.
std::string res(CUresult r);

// Registers a block of memory under a name made of `prefix` and a per-prefix counter ("D0", "H1", ...)
// and returns that name. Later blocks win where ranges overlap, so a freed and reused address gets the
// name of its newest block.
std::string add_block(const char* prefix, std::uintptr_t base, std::size_t size);

// An address in canonical form: "0" for NULL, "D0" or "D0+4096" inside (or just past the end of) a
// registered block, "unknown" otherwise. Never a raw address, so output is the same on every run and GPU.
std::string ptr(std::uintptr_t address);
inline std::string ptr(const void* address) { return ptr(reinterpret_cast<std::uintptr_t>(address)); }

// A handle in canonical form: "null", or `kind` and the order in which this kind's handles were first
// seen ("C0", "S1", ...), so the same handle prints the same name each time.
std::string handle(const char* kind, const void* h);
std::string handle(const char* kind, unsigned long long h);

// Prints one line to stdout and flushes it, so output stays in call order across fork and crashes.
void line(const char* format, ...) __attribute__((format(printf, 1, 2)));

// Prints "NAME(ARGS) -> RESULT" plus `outcome` (when the call succeeded and outcome is not empty).
void call(const std::string& name, const std::string& args, CUresult r, const std::string& outcome = "");

inline std::string outcome() { return ""; }
inline std::string outcome(const std::string& s) { return s; }

// A current primary context on device 0 (cuInit, cuDevicePrimaryCtxRetain, cuCtxSetCurrent), printed.
CUcontext primary_context();

// Bytes read back from host-visible memory as hex ("01020304"), for outcomes.
std::string hex(const void* data, std::size_t bytes);

}  // namespace conf

// CALL(NAME, ARGS, EXPR[, OUTCOME]): describes the arguments, makes the call, then (only on success)
// evaluates OUTCOME, which may read what the call wrote, and prints the line.
#define CALL(name, args, expr, ...)                                                            \
  do {                                                                                         \
    const std::string conf_args_ = (args);                                                     \
    const CUresult conf_r_ = (expr);                                                           \
    conf::call(name, conf_args_, conf_r_,                                                      \
               conf_r_ == CUDA_SUCCESS ? conf::outcome(__VA_ARGS__) : std::string());          \
  } while (0)
