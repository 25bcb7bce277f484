// Test library B for RTLD_NEXT semantics: the definition that comes after library A.
extern "C" __attribute__((visibility("default"))) int probe_value() { return 2; }

// Referenced by the test program so the linker keeps this library in its dependencies.
extern "C" __attribute__((visibility("default"))) int probe_b_marker() { return 2; }
