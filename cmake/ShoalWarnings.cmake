# Warnings are PRIVATE to shoal's own targets; consumers are not forced to use them.
function(shoal_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra)
  if(SHOAL_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
