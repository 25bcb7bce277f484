/* Test-only control API of the simulated CUDA runtime (libcudart.so.13 from tests/simcuda/runtime). */
#ifndef SIMCUDART_H
#define SIMCUDART_H

#ifdef __cplusplus
extern "C" {
#endif

/* Forgets what the runtime knows about devices and contexts (driver initialised, retained primary
 * contexts, every thread's current device and bound context) and clears the caller's last error,
 * so the next call initialises again (cuInit + primary-context retain). Call it right after
 * simcuda_reset(), which destroys the driver state the runtime was pointing at. The resolved
 * driver entry points are kept: the runtime queries cuGetProcAddress only once per process, as
 * the real libcudart does. Threads other than the caller must not be inside the runtime. */
void simcudart_reset_for_tests(void);

/* Marks the process as serving in the simulated driver's serving oracle (simcuda_mark_serving in
 * tests/simcuda/simcuda.h): from now on, executed work that touches a VMM handle mapped at more than
 * one address ends the process with exit status 86. For programs linked only against this runtime,
 * which cannot reach the driver's exports directly. Returns simcuda_mark_serving's result (0), or -1
 * when the driver cannot be loaded or has no oracle. */
int simcudart_mark_serving(void);

#ifdef __cplusplus
}
#endif

#endif
