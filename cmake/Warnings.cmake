# Warnings are errors for project code; third-party headers come in as SYSTEM includes.
add_library(vigil_warnings INTERFACE)
target_compile_options(vigil_warnings INTERFACE
  $<$<COMPILE_LANGUAGE:C,CXX>:-Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
                               -Wcast-align -Wnull-dereference -Wdouble-promotion -Wformat=2 -Werror>
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor -Wold-style-cast>)
