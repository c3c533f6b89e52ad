# rf_add_layer(NAME DIR DEPS...): a static library from every .cpp in DIR.
function(rf_add_layer name dir)
  file(GLOB srcs CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/${dir}/*.cpp)
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_include_directories(${name} PUBLIC ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} PUBLIC ${ARGN})
  else()  # a layer with headers only (so far)
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(${name} INTERFACE ${ARGN})
  endif()
endfunction()

# rf_add_test(NAME LABEL [SERIAL] SOURCES... LIBS libs...): a GoogleTest
# binary whose tests are registered with ctest under LABEL (run alone when
# SERIAL).
function(rf_add_test name label)
  cmake_parse_arguments(T "SERIAL" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE
    ROCMFORGE_TESTDATA_DEFAULT="${CMAKE_SOURCE_DIR}/../shared/testdata"
    ROCMFORGE_TEST_TEMPLATES="${CMAKE_SOURCE_DIR}/tests/templates"
    ROCMFORGE_DOCS_DIR="${CMAKE_SOURCE_DIR}/docs")
  set(props LABELS ${label})
  if(T_SERIAL)  # tests that read device-wide state must not share the machine
    list(APPEND props RUN_SERIAL TRUE)
  endif()
  gtest_discover_tests(${name} PROPERTIES ${props} DISCOVERY_TIMEOUT 60)
endfunction()
