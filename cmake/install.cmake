# Installation: the library (SONAME = ABI major), headers, a pkg-config file, a relocatable
# CMake package with a version file, the CLI and the default model. A build-tree export lets
# add_subdirectory/build-tree users find the same targets.
include(CMakePackageConfigHelpers)

set(TINYMLIR_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/tinymlir)

install(TARGETS tinymlir tinymlir_runtime tinymlir_headers EXPORT tinymlirTargets
  FILE_SET HEADERS DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The compiler library beside libtinymlir.so, which loads it from its own folder; private
# (no development name link, not part of the CMake package).
install(TARGETS tinymlir_compiler LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} NAMELINK_SKIP)
# The compiler process beside them: libtinymlir.so starts it from its own folder.
install(TARGETS tinymlir_compiler_process RUNTIME DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/capi/include/tinymlir
  ${PROJECT_SOURCE_DIR}/gpt2/include/tinymlir ${PROJECT_BINARY_DIR}/include/tinymlir
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT tinymlirTargets NAMESPACE tinymlir:: DESTINATION ${TINYMLIR_CMAKE_DIR})
export(EXPORT tinymlirTargets NAMESPACE tinymlir::
  FILE ${PROJECT_BINARY_DIR}/tinymlirTargets.cmake)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/tinymlirConfig.cmake.in
  ${PROJECT_BINARY_DIR}/tinymlirConfig.cmake INSTALL_DESTINATION ${TINYMLIR_CMAKE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/tinymlirConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/tinymlirConfig.cmake
  ${PROJECT_BINARY_DIR}/tinymlirConfigVersion.cmake DESTINATION ${TINYMLIR_CMAKE_DIR})

# pkg-config: relocatable, the prefix found from the .pc file's own place (${pcfiledir});
# libdir/includedir relative to it when they are relative.
file(RELATIVE_PATH TINYMLIR_PC_TO_PREFIX "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" TINYMLIR_PC_TO_PREFIX "${TINYMLIR_PC_TO_PREFIX}")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(TINYMLIR_PC_LIBDIR "${CMAKE_INSTALL_LIBDIR}")
else()
  set(TINYMLIR_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
endif()
if(IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  set(TINYMLIR_PC_INCLUDEDIR "${CMAKE_INSTALL_INCLUDEDIR}")
else()
  set(TINYMLIR_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/pkgconfig/tinymlir.pc.in
  ${PROJECT_BINARY_DIR}/tinymlir.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/tinymlir.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

install(TARGETS tinymlir-cli tinymlir-run-cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/models/ DESTINATION ${CMAKE_INSTALL_DATADIR}/tinymlir/models)
