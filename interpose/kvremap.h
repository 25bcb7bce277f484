/* kvremap's public C API: what an engine or plugin may call (e.g. through ctypes). */
#ifndef KVREMAP_H
#define KVREMAP_H

#ifdef __cplusplus
extern "C" {
#endif

/* The library version as "MAJOR.MINOR.PATCH"; a static string. */
const char* kvremap_version(void);

/* With KVREMAP_MODE=defer: allocations the calling thread makes between kvremap_tag_push("kv") and
 * the matching kvremap_tag_pop() are the KV cache (deferred when the tag is closed and the engine
 * moves on); "none" opens a nested untagged region. 0 on success, -1 for an unknown tag, a tag
 * nested deeper than 32, or an unbalanced pop. */
int kvremap_tag_push(const char* tag);
int kvremap_tag_pop(void);

/* With KVREMAP_MODE=defer: commits the deferred KV cache now (KVREMAP_COMMIT=manual, or earlier than
 * the trigger would). 0 when committed, -1 when there is nothing to commit or a capture is open. */
int kvremap_commit(void);

#ifdef __cplusplus
}
#endif

#endif
