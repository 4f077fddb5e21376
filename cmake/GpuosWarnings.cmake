# gpuos_target_warnings(<target>): the project's warning set, errors when
# GPUOS_WARNINGS_AS_ERRORS is on. Third-party headers are SYSTEM includes.
function(gpuos_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wshadow
    -Wnon-virtual-dtor -Wno-missing-field-initializers)
  if(GPUOS_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
  if(GPUOS_SANITIZE)
    target_compile_options(${target} PRIVATE -fsanitize=address,undefined -fno-omit-frame-pointer)
    target_link_options(${target} PRIVATE -fsanitize=address,undefined)
  endif()
endfunction()
