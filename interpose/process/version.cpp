// The library's version, exported so tools and engines can tell which kvremap is loaded.
#include "interpose/kvremap.h"

#include "interpose/version_number.h"

extern "C" __attribute__((visibility("default"))) const char* kvremap_version(void) { return KVREMAP_VERSION_STRING; }
