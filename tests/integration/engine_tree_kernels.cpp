// Host implementation of the simulated `touch` kernel for engine_tree.py, which loads this library RTLD_GLOBAL.
extern "C" __attribute__((visibility("default"))) void simcuda_kernel_touch(void** params) {
  auto* p = *static_cast<unsigned char**>(params[0]);
  p[0] = 1;
}
