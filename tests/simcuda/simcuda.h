/* Test-only control API of the simulated driver (libcuda.so.1 from tests/simcuda); not part of CUDA. */
#ifndef SIMCUDA_H
#define SIMCUDA_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tears down every simulated allocation, handle, stream, graph and module, then reads the
 * configuration again: the SIMCUDA_* environment, overridden by `settings` (may be NULL), a
 * whitespace-separated list of NAME=VALUE pairs such as "SIMCUDA_DEVICE_MEMORY=1GiB". The driver is
 * left uninitialised (cuInit must be called again). Returns 0, or -1 after printing one line naming
 * the bad setting to stderr. Threads other than the caller must not be inside the driver. */
int simcuda_reset(const char* settings);

/* Bytes currently charged against device `device`'s capacity (allocations, handles, contexts,
 * graph execs, modules), and against the simulated host memory (host-located VMM handles). */
unsigned long long simcuda_device_used_bytes(int device);
unsigned long long simcuda_host_used_bytes(void);

/* Live VMM objects: physical handles (cuMemCreate not yet released), VA reservations and mappings;
 * for leak checks. */
unsigned long long simcuda_live_handles(void);
unsigned long long simcuda_live_reservations(void);
unsigned long long simcuda_live_mappings(void);

/* How many times the driver function `name` was entered since the last reset (per-thread-stream
 * variants count under their base export, e.g. cuLaunchKernel_ptsz under cuLaunchKernel). */
unsigned long long simcuda_call_count(const char* name);

/* The log of cuGetProcAddress queries since the last reset, oldest first. Returns 0 and fills the
 * outputs for index < count, -1 otherwise. `symbol` receives at most symbol_len-1 characters. */
size_t simcuda_proc_address_query_count(void);
int simcuda_proc_address_query(size_t index, char* symbol, size_t symbol_len, int* cuda_version,
                               unsigned long long* flags);

/* The serving oracle. From this call on (until simcuda_reset; a forked child starts unmarked), any
 * kernel launch, graph-node replay, memcpy or memset the driver executes whose memory touches a VMM
 * physical handle mapped at more than one address (a scratch alias) prints one line to stderr,
 *   simcuda: serving oracle: CALL touched 0xADDR which maps a handle mapped at N addresses
 *   (scratch-backed memory used after serving began)
 * and ends the process with _exit(86). Copies and memsets are checked over their whole destination
 * and source ranges; kernels at every 64-bit word of their arguments read as a pointer. Returns 0.
 * simcuda_serving_marked returns 1 once marked, else 0. Programs that link only the simulated
 * runtime call simcudart_mark_serving() (runtime/simcudart.h), which forwards here. */
int simcuda_mark_serving(void);
int simcuda_serving_marked(void);

/* Sets `bytes` bytes of simulated device memory at `dst` to `value`, as a kernel's host implementation
 * writes them (no stream, no oracle: the kernel launch was checked). A zero fill of a large range
 * releases its pages instead of touching them, as cuMemsetD8 does. Returns 0. */
int simcuda_fill_device(unsigned long long dst, unsigned char value, unsigned long long bytes);

/* The SIMCUDA_* settings as a Markdown table (name, default, meaning): the single source of
 * docs/simulator.md's knob table. Static storage. */
const char* simcuda_settings_markdown(void);

/* The export list. Every function cuda.h declares (in its default, per-thread-stream and internal
 * old-ABI modes) is exported; those the simulator does not implement return CUDA_ERROR_NOT_SUPPORTED
 * and print one line naming themselves, once. simcuda_is_simulated returns 1 for an implemented
 * function, 0 for such a stub, -1 for a name cuda.h does not declare. The list is sorted by name. */
int simcuda_is_simulated(const char* name);
size_t simcuda_cuda_h_function_count(void);
const char* simcuda_cuda_h_function(size_t index);

#ifdef __cplusplus
}
#endif

#endif
