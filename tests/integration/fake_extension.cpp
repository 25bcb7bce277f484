// A native extension module of an engine, as `import vllm` loads vllm/_C.abi3.so: built twice with different
// build ids (tests/integration/CMakeLists.txt), the engine's build as the profile key sees it.
extern "C" __attribute__((visibility("default"))) int kvremap_fake_extension_marker() { return 1; }
