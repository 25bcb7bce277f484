/* Uses kvremap's C API through the installed header with weak references (KVREMAP_OPTIONAL, set by
 * the CMake target and by pkg-config): runs with and without the preloaded library and says which. */
#include <kvremap/kvremap.h>
#include <stdio.h>

int main(void) {
#ifdef KVREMAP_LIBRARY_PATH
  printf("consumer: package library %s\n", KVREMAP_LIBRARY_PATH);
#endif
  if (!kvremap_version || !kvremap_tag_push || !kvremap_tag_pop || !kvremap_commit) {
    printf("consumer: kvremap not loaded\n");
    return 0;
  }
  const int push = kvremap_tag_push("kv");
  const int pop = kvremap_tag_pop();
  printf("consumer: kvremap %s loaded, tag_push %d, tag_pop %d, commit %d\n", kvremap_version(), push, pop,
         kvremap_commit());
  return 0;
}
