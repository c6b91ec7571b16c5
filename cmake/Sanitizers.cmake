# ASan + UBSan for the unit tests (preset "asan"); every UB report aborts the test.
if(VIGIL_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
