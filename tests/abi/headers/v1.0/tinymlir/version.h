/* As CMake generated it for tinymlir 1.0.0 (cmake/version.h.in): the project's one version (CMakeLists.txt). */
#ifndef TINYMLIR_VERSION_H
#define TINYMLIR_VERSION_H

#define TM_VERSION_MAJOR 1
#define TM_VERSION_MINOR 0
#define TM_VERSION_PATCH 0
#define TM_VERSION_STRING "1.0.0"

/* The ABI version: see tm_api_version() in tinymlir.h. */
#define TM_API_VERSION 1000u

#endif /* TINYMLIR_VERSION_H */
