# Install rules: the preload library, the CLI and its man page, the C header with its CMake package and
# pkg-config files, the Python helper, the docs, license and changelog. Nothing of the tests, the
# simulator or the examples is installed.
include(CMakePackageConfigHelpers)

# Installing and packaging take what is built and build nothing: cpack's "preinstall" step would
# otherwise build every target first, inside a test suite whose programs are running
# (tests/integration/test_install.cpp), and `cmake --install` never builds either.
set(CMAKE_SKIP_INSTALL_ALL_DEPENDENCY ON)

install(TARGETS kvremap LIBRARY DESTINATION ${KVREMAP_INSTALL_LIBDIR})
install(TARGETS kvremap_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${PROJECT_SOURCE_DIR}/interpose/kvremap.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kvremap)
install(FILES ${CMAKE_BINARY_DIR}/man/kvremap.1.gz DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/kvremap DESTINATION ${KVREMAP_INSTALL_PYTHONDIR}
        FILES_MATCHING PATTERN "*.py")
# The same helper as a wheel, for the virtual environments engines run in (python/CMakeLists.txt).
install(FILES ${KVREMAP_WHEEL} DESTINATION ${CMAKE_INSTALL_DATADIR}/kvremap/python)

# The C API as a package: header only (the functions are weak references the preloaded library
# resolves), with the library's installed path for programs that preload it themselves.
configure_package_config_file(${PROJECT_SOURCE_DIR}/packaging/kvremapConfig.cmake.in
  ${CMAKE_BINARY_DIR}/packaging/kvremapConfig.cmake
  INSTALL_DESTINATION ${KVREMAP_INSTALL_CMAKEDIR}
  PATH_VARS CMAKE_INSTALL_INCLUDEDIR KVREMAP_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/packaging/kvremapConfigVersion.cmake
  COMPATIBILITY SameMajorVersion ARCH_INDEPENDENT)
install(FILES ${CMAKE_BINARY_DIR}/packaging/kvremapConfig.cmake ${CMAKE_BINARY_DIR}/packaging/kvremapConfigVersion.cmake
        DESTINATION ${KVREMAP_INSTALL_CMAKEDIR})
# pkg-config finds its prefix from the file's own place (pcfiledir), so the tree can move.
cmake_path(RELATIVE_PATH CMAKE_INSTALL_PREFIX BASE_DIRECTORY "${CMAKE_INSTALL_PREFIX}/${KVREMAP_INSTALL_PKGCONFIGDIR}"
           OUTPUT_VARIABLE KVREMAP_PREFIX_FROM_PCDIR)
configure_file(${PROJECT_SOURCE_DIR}/packaging/kvremap.pc.in ${CMAKE_BINARY_DIR}/packaging/kvremap.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/packaging/kvremap.pc DESTINATION ${KVREMAP_INSTALL_PKGCONFIGDIR})

# Docs, license (Debian's copyright format) and changelog, compressed as Debian installs them.
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/packaging/changelog.gz
  COMMAND ${CMAKE_COMMAND} -DINPUT=${PROJECT_SOURCE_DIR}/packaging/changelog
          -DOUTPUT=${CMAKE_BINARY_DIR}/packaging/changelog.gz -P ${PROJECT_SOURCE_DIR}/cmake/gzip_file.cmake
  DEPENDS ${PROJECT_SOURCE_DIR}/packaging/changelog ${PROJECT_SOURCE_DIR}/cmake/gzip_file.cmake VERBATIM)
add_custom_target(kvremap_changelog ALL DEPENDS ${CMAKE_BINARY_DIR}/packaging/changelog.gz)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/SECURITY.md ${PROJECT_SOURCE_DIR}/packaging/copyright
              ${CMAKE_BINARY_DIR}/packaging/changelog.gz
        DESTINATION ${KVREMAP_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${KVREMAP_INSTALL_DOCDIR}/docs)
