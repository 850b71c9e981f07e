# shoal_check_headers: every installed header compiles on its own (as
# Seastar's checkheaders does), so no header leans on what another happened
# to include first. Also refuses, at configure time, an installed header
# that includes anything under tests/.
function(shoal_check_headers)
  file(GLOB_RECURSE headers RELATIVE ${PROJECT_SOURCE_DIR}/include CONFIGURE_DEPENDS
       ${PROJECT_SOURCE_DIR}/include/shoal/*.hpp)
  set(sources "")
  foreach(h IN LISTS headers)
    file(READ ${PROJECT_SOURCE_DIR}/include/${h} text)
    if(text MATCHES "#include[ \t]*[\"<]tests/")
      message(FATAL_ERROR "include/${h} includes a file under tests/: installed headers must not")
    endif()
    string(MAKE_C_IDENTIFIER ${h} id)
    set(src ${PROJECT_BINARY_DIR}/check_headers/${id}.cpp)
    # Twice: the second include checks the include guard.
    file(CONFIGURE OUTPUT ${src} CONTENT "#include <${h}>\n#include <${h}>\n")
    list(APPEND sources ${src})
  endforeach()
  add_library(shoal_check_headers OBJECT ${sources})
  target_link_libraries(shoal_check_headers PRIVATE shoal::shoal)
  shoal_warnings(shoal_check_headers)
endfunction()
