# vigil_layer(<target> <prefix>): gives a layer library an include root of its own.
#
# Every header in the calling directory (not its subdirectories, which are layers of their own) is
# linked into ${CMAKE_BINARY_DIR}/layers/<target>/<prefix>/, and that folder's parent is the
# target's PUBLIC include directory. So "<prefix>/<name>.h" resolves only for the layer itself and
# the targets that link it: an include that points up a layer fails to build, whether or not it
# needs a symbol, because nothing below has the upper layer's root. (With one include root for the
# whole tree, PRIVATE links alone would not catch a header-only include.)
function(vigil_layer target prefix)
  set(root ${CMAKE_BINARY_DIR}/layers/${target})
  file(GLOB headers CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.h)
  file(REMOVE_RECURSE ${root})
  file(MAKE_DIRECTORY ${root}/${prefix})
  foreach(header IN LISTS headers)
    get_filename_component(name ${header} NAME)
    file(CREATE_LINK ${header} ${root}/${prefix}/${name} SYMBOLIC)
  endforeach()
  target_include_directories(${target} PUBLIC ${root})
endfunction()
