/* kvremap's public C API: what an engine or plugin may call while the library is preloaded. */
#ifndef KVREMAP_H
#define KVREMAP_H

/* The library is preloaded (LD_PRELOAD, `kvremap run`), never linked. A program that must also run
 * without it defines KVREMAP_OPTIONAL before including this header (the installed CMake target
 * kvremap::api and `pkg-config --cflags kvremap` do): the functions are then weak references, null
 * when kvremap is not in the process, so the program links without the library and tests for it:
 *   if (kvremap_tag_push) kvremap_tag_push("kv");                                                   */
#ifdef KVREMAP_OPTIONAL
#define KVREMAP_FUNCTION __attribute__((weak))
#else
#define KVREMAP_FUNCTION
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The library version as "MAJOR.MINOR.PATCH"; a static string. */
KVREMAP_FUNCTION const char* kvremap_version(void);

/* With KVREMAP_MODE=defer: allocations the calling thread makes between kvremap_tag_push("kv") and
 * the matching kvremap_tag_pop() are the KV cache (deferred when the tag is closed and the engine
 * moves on); "none" opens a nested untagged region. 0 on success, -1 for an unknown tag, a tag
 * nested deeper than 32, or an unbalanced pop. */
KVREMAP_FUNCTION int kvremap_tag_push(const char* tag);
KVREMAP_FUNCTION int kvremap_tag_pop(void);

/* With KVREMAP_MODE=defer: commits the deferred KV cache now (KVREMAP_COMMIT=manual, or earlier than
 * the trigger would). 0 when committed, -1 when there is nothing to commit or a capture is open. */
KVREMAP_FUNCTION int kvremap_commit(void);

#ifdef __cplusplus
}
#endif

#endif
