/* kvremap's public C API: what an engine or plugin may call (e.g. through ctypes). */
#ifndef KVREMAP_H
#define KVREMAP_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library version as "MAJOR.MINOR.PATCH"; a static string. */
const char* kvremap_version(void);

#ifdef __cplusplus
}
#endif

#endif
