# cpp-httplib for rf_server (included from src/CMakeLists.txt).
# Normal builds link Debian's shared libcpp-httplib (pkg-config cpp-httplib,
# with its compile flags, so the header matches the library's ABI).
# ROCMFORGE_STATIC builds run where Debian's shared libraries are absent, and
# Debian ships no static libcpp-httplib and only a declarations-only header.
# There, the same Debian source package (apt-get source, same version, Debian's
# patches applied) is fetched once into the build tree by
# fetch_httplib_source.sh and its header-only httplib.h is compiled into
# rf_server, without TLS/zlib/brotli and with poll() instead of select().
# RF_HTTPLIB_SOURCE_DIR may point to such a header instead.
if(ROCMFORGE_STATIC)
  set(RF_HTTPLIB_SOURCE_DIR "" CACHE PATH "Folder with the header-only httplib.h for static builds (empty: fetch Debian's source)")
  set(rf_httplib_dir "${RF_HTTPLIB_SOURCE_DIR}")
  if(NOT rf_httplib_dir)
    set(rf_httplib_dir "${CMAKE_BINARY_DIR}/_deps/cpp-httplib")
    if(NOT EXISTS "${rf_httplib_dir}/httplib.h")
      message(STATUS "cpp-httplib: fetching Debian's source for a static build")
      execute_process(COMMAND bash "${CMAKE_CURRENT_LIST_DIR}/fetch_httplib_source.sh" "${rf_httplib_dir}"
                      RESULT_VARIABLE rf_httplib_rc)
      if(NOT rf_httplib_rc EQUAL 0)
        message(FATAL_ERROR "cpp-httplib: could not fetch Debian's source (see above); set RF_HTTPLIB_SOURCE_DIR "
                            "to a folder with cpp-httplib's header-only httplib.h")
      endif()
    endif()
  endif()
  file(STRINGS "${rf_httplib_dir}/httplib.h" rf_httplib_impl REGEX "^inline bool Server::listen_internal")
  if(NOT rf_httplib_impl)
    message(FATAL_ERROR "cpp-httplib: ${rf_httplib_dir}/httplib.h is not the header-only form (no implementation)")
  endif()
  # BEFORE: this httplib.h wins over /usr/include's declarations-only one.
  target_include_directories(rf_server BEFORE PRIVATE "${rf_httplib_dir}")
  target_compile_definitions(rf_server PRIVATE CPPHTTPLIB_USE_POLL CPPHTTPLIB_LISTEN_BACKLOG=1024)
  target_link_libraries(rf_server PRIVATE Threads::Threads)
else()
  pkg_check_modules(CPP_HTTPLIB REQUIRED IMPORTED_TARGET cpp-httplib)
  target_link_libraries(rf_server PRIVATE PkgConfig::CPP_HTTPLIB)
endif()
