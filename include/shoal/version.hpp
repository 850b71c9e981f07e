#pragma once
// shoal's version, and the language standard it needs. Every public header
// includes this file, so a consumer compiled below C++20 gets one clear
// message instead of pages of errors from the coroutine headers.

#if !defined(__cplusplus) || __cplusplus < 202002L
#error "shoal needs C++20 or later: compile with -std=c++20 (or a later standard such as -std=c++23)"
#endif

/// shoal's version: major.minor.patch. 0.x minor versions are not
/// compatible with each other (the shared library's soname carries
/// major.minor). CMakeLists.txt reads the version from these lines.
#define SHOAL_VERSION_MAJOR 0
#define SHOAL_VERSION_MINOR 1
#define SHOAL_VERSION_PATCH 0
/// The version as one number: major * 10000 + minor * 100 + patch.
#define SHOAL_VERSION (SHOAL_VERSION_MAJOR * 10000 + SHOAL_VERSION_MINOR * 100 + SHOAL_VERSION_PATCH)
