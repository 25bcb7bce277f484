// How every exported hook is spelled: one home for the declarations all hook files share.
#pragma once

// A hook: an exported C function that interposes on a symbol of libc, libcudart or libcuda. Only
// these and the kvremap_* C API leave the library (exports.map).
#define KVREMAP_HOOK extern "C" __attribute__((visibility("default")))

// Declares an export the toolkit's headers leave out in their default mode (the per-thread-stream
// `_ptsz`/`_ptds` variants) with the type of the function it varies.
#define KVREMAP_DECLARE_VARIANT(base, variant) extern "C" decltype(base) variant;
