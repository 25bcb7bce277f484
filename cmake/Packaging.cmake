# The Debian package (cpack -G DEB, scripts/package.sh): kvremap_<version>_amd64.deb with what
# `cmake --install` installs under /usr. Runtime dependencies are the Debian library packages the
# binaries link (dpkg-shlibdeps); none on CUDA: the driver comes with the machine, found at run time.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME kvremap)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR "the kvremap developers")
set(CPACK_PACKAGE_CONTACT "kvremap maintainers <maintainers@users.noreply.a-seed-a97f24fa.example>")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The Python helper (import kvremap) needs an interpreter; the library and the tool do not.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS python3)
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "defers an LLM engine's KV-cache backing until start-up memory is measured")
# The long description under that synopsis: CPack indents its lines and turns the empty one into a
# paragraph break.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "kvremap is an LD_PRELOAD library for unmodified LLM serving engines (vLLM,
SGLang). It backs their KV cache with a small scratch while kernel
autotuning and CUDA-graph capture run, measures what that work needs, then
backs the KV cache with device memory at the same addresses, so the engine
neither runs out of memory in its start-up nor leaves memory idle.

This package holds the library, the kvremap tool (kvremap run, report,
plot, diff, merge, what-if), the C API header with its CMake and pkg-config
files, and the Python helper (import kvremap).")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
include(CPack)
