# Builds examples/c/affine.c against an installed tinymlir the way a user would, runs it and
# checks its output. Run with cmake -P and:
#   MODE=pkg-config    cc affine.c $(pkg-config --cflags --libs tinymlir) (PKG_CONFIG_PATH
#                      from the environment), with an RPATH to pkg-config's libdir
#   MODE=find_package  configure and build tests/install/find_package with
#                      CMAKE_PREFIX_PATH=PREFIX
# plus SOURCE (affine.c), WORK (a scratch folder), CC, PKG_CONFIG, GENERATOR, PREFIX and
# EXTRA_FLAGS (e.g. the sanitizer flags the library was built with).
cmake_minimum_required(VERSION 3.20)

# Runs one step; stops the test with its output if it fails. The output is in `step_out`.
function(step)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " line "${ARGN}")
  message(STATUS "$ ${line}\n${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${line}")
  endif()
  set(step_out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
separate_arguments(extra UNIX_COMMAND "${EXTRA_FLAGS}")

if(MODE STREQUAL "pkg-config")
  step(${PKG_CONFIG} --cflags --libs tinymlir)
  separate_arguments(flags UNIX_COMMAND "${step_out}")
  step(${PKG_CONFIG} --variable=libdir tinymlir)
  string(STRIP "${step_out}" libdir)
  set(exe "${WORK}/affine")
  step(${CC} ${extra} "${SOURCE}" ${flags} "-Wl,-rpath,${libdir}" -o "${exe}")
elseif(MODE STREQUAL "find_package")
  get_filename_component(project_dir "${CMAKE_CURRENT_LIST_DIR}/find_package" ABSOLUTE)
  step(${CMAKE_COMMAND} -S "${project_dir}" -B "${WORK}" -G "${GENERATOR}"
    "-DCMAKE_PREFIX_PATH=${PREFIX}" "-DCMAKE_C_COMPILER=${CC}" "-DCMAKE_C_FLAGS=${EXTRA_FLAGS}"
    "-DAFFINE_SOURCE=${SOURCE}")
  string(FIND "${step_out}" " found in ${PREFIX}/" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "find_package found tinymlir outside ${PREFIX}")
  endif()
  step(${CMAKE_COMMAND} --build "${WORK}")
  set(exe "${WORK}/affine")
else()
  message(FATAL_ERROR "MODE must be pkg-config or find_package, not '${MODE}'")
endif()

step("${exe}")
if(NOT step_out MATCHES "3 traced -> 1 after fusion")
  message(FATAL_ERROR "the program's output lacks '3 traced -> 1 after fusion'")
endif()
