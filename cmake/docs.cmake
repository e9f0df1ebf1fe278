# The C API reference (docs/c-api/Doxyfile.in): `ninja docs` writes it to build/docs/html,
# and the CTest test docs_c_api_reference fails on an undocumented public function or a
# Doxygen warning of another kind (docs/c-api/check_reference.py). Without Doxygen (Debian:
# doxygen) there is neither.
find_package(Doxygen QUIET)
if(NOT DOXYGEN_EXECUTABLE)
  message(STATUS "Doxygen not found: no C API reference (scripts/install-deps.sh installs it)")
  return()
endif()
set(TINYMLIR_DOCS_DIR ${PROJECT_BINARY_DIR}/docs)
if(DEFINED Python3_EXECUTABLE)
  set(TINYMLIR_DOCS_PYTHON ${Python3_EXECUTABLE})
else()
  find_program(TINYMLIR_DOCS_PYTHON NAMES python3 REQUIRED)
endif()
configure_file(${PROJECT_SOURCE_DIR}/docs/c-api/Doxyfile.in ${TINYMLIR_DOCS_DIR}/Doxyfile @ONLY)
add_custom_target(docs
  COMMAND ${DOXYGEN_EXECUTABLE} ${TINYMLIR_DOCS_DIR}/Doxyfile
  WORKING_DIRECTORY ${TINYMLIR_DOCS_DIR}
  COMMENT "The C API reference: ${TINYMLIR_DOCS_DIR}/html/index.html"
  VERBATIM)
if(TINYMLIR_BUILD_TESTS)
  add_test(NAME docs_c_api_reference
    COMMAND ${TINYMLIR_DOCS_PYTHON} ${PROJECT_SOURCE_DIR}/docs/c-api/check_reference.py
            ${DOXYGEN_EXECUTABLE} ${TINYMLIR_DOCS_DIR}/Doxyfile ${TINYMLIR_DOCS_DIR}/warnings.txt
    WORKING_DIRECTORY ${TINYMLIR_DOCS_DIR})
endif()
