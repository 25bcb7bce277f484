# Where `cmake --install` and the Debian package put each part, relative to the prefix (the CLI finds
# the library through the same relative path, so an installed tree works wherever it is moved).
include(GNUInstallDirs)
# The architecture's library directory whatever the prefix (Debian: lib/x86_64-linux-gnu), where
# pkg-config and find_package look for an architecture's files.
if(CMAKE_LIBRARY_ARCHITECTURE)
  set(KVREMAP_INSTALL_ARCH_LIBDIR "lib/${CMAKE_LIBRARY_ARCHITECTURE}")
else()
  set(KVREMAP_INSTALL_ARCH_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
endif()
# A preload library is named by its path, never linked: a private directory keeps it off the linker's
# and the loader's search paths (no ldconfig) and out of the way of the system's libraries.
set(KVREMAP_INSTALL_LIBDIR "${KVREMAP_INSTALL_ARCH_LIBDIR}/kvremap" CACHE STRING
    "Directory of libkvremap.so, relative to the prefix")
set(KVREMAP_INSTALL_PYTHONDIR "lib/python3/dist-packages" CACHE STRING
    "Directory of the Python helper (import kvremap), relative to the prefix; Debian's python3 searches /usr/lib/python3/dist-packages")
set(KVREMAP_INSTALL_DOCDIR "${CMAKE_INSTALL_DATAROOTDIR}/doc/kvremap")
# The C API's package files (architecture-dependent: they name the library's directory).
set(KVREMAP_INSTALL_PKGCONFIGDIR "${KVREMAP_INSTALL_ARCH_LIBDIR}/pkgconfig")
set(KVREMAP_INSTALL_CMAKEDIR "${KVREMAP_INSTALL_ARCH_LIBDIR}/cmake/kvremap")
# From the CLI's directory to the library's, in an installed tree.
cmake_path(RELATIVE_PATH KVREMAP_INSTALL_LIBDIR BASE_DIRECTORY "${CMAKE_INSTALL_BINDIR}"
           OUTPUT_VARIABLE KVREMAP_LIBDIR_FROM_BINDIR)
