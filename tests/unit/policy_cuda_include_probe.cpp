// Deliberately includes a CUDA header with policy/'s compile flags: this must fail to compile.
#include <cuda.h>
#include "policy/units.h"
int kvremap_policy_probe() { return CUDA_VERSION; }
