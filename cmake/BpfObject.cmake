# bpf_object(NAME SOURCE): compiles bpf/NAME.bpf.c for the BPF target (CO-RE) and generates its
# libbpf skeleton; the target NAME_skel carries the include directory of NAME.skel.h.
find_program(VIGIL_CLANG NAMES clang clang-14 REQUIRED)
find_program(VIGIL_BPFTOOL NAMES bpftool PATHS /usr/sbin /usr/local/sbin REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBBPF REQUIRED IMPORTED_TARGET GLOBAL libbpf>=1.1)

# Cached (INTERNAL) rather than directory variables: bpf_compile() also runs from tests/agent.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64")
  set(VIGIL_BPF_ARCH x86 CACHE INTERNAL "")
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "aarch64|arm64")
  set(VIGIL_BPF_ARCH arm64 CACHE INTERNAL "")
else()
  message(FATAL_ERROR "vigil: no BPF target arch for ${CMAKE_SYSTEM_PROCESSOR}")
endif()
execute_process(COMMAND ${CMAKE_C_COMPILER} -print-multiarch
                OUTPUT_VARIABLE multiarch OUTPUT_STRIP_TRAILING_WHITESPACE)
set(VIGIL_MULTIARCH ${multiarch} CACHE INTERNAL "")

# vmlinux.h is generated from the build host's BTF (docs/decisions.md says why); CO-RE relocates
# the field offsets on whichever kernel loads the object.
set(VIGIL_VMLINUX_BTF /sys/kernel/btf/vmlinux CACHE FILEPATH "BTF blob to generate vmlinux.h from")
set(VIGIL_BPF_GEN_DIR ${CMAKE_BINARY_DIR}/bpf CACHE INTERNAL "")
if(NOT EXISTS ${VIGIL_VMLINUX_BTF})
  message(FATAL_ERROR "vigil: ${VIGIL_VMLINUX_BTF} is missing; build on a kernel with BTF "
                      "(CONFIG_DEBUG_INFO_BTF) or set -DVIGIL_VMLINUX_BTF=<file>")
endif()
add_custom_command(
  OUTPUT ${VIGIL_BPF_GEN_DIR}/vmlinux.h
  COMMAND ${CMAKE_COMMAND} -E make_directory ${VIGIL_BPF_GEN_DIR}
  COMMAND ${VIGIL_BPFTOOL} btf dump file ${VIGIL_VMLINUX_BTF} format c > ${VIGIL_BPF_GEN_DIR}/vmlinux.h
  COMMENT "Generating vmlinux.h from ${VIGIL_VMLINUX_BTF}"
  VERBATIM)
add_custom_target(vigil_vmlinux_h DEPENDS ${VIGIL_BPF_GEN_DIR}/vmlinux.h)

# bpf_compile(NAME SOURCE OUT_DIR): the compile rule alone, OUT_DIR/NAME.bpf.o, its path in
# NAME_BPF_OBJECT. A target outside bpf/ that builds it needs add_dependencies(.. vigil_vmlinux_h).
function(bpf_compile name source out_dir)
  set(obj ${out_dir}/${name}.bpf.o)
  get_filename_component(src_abs ${source} ABSOLUTE)
  get_filename_component(src_dir ${src_abs} DIRECTORY)
  file(GLOB headers ${src_dir}/*.h)
  add_custom_command(
    OUTPUT ${obj}
    COMMAND ${VIGIL_CLANG} -g -O2 -target bpf -D__TARGET_ARCH_${VIGIL_BPF_ARCH}
            -Wall -Werror -I${VIGIL_BPF_GEN_DIR} -I${src_dir} -I/usr/include/${VIGIL_MULTIARCH}
            -c ${src_abs} -o ${obj}
    DEPENDS ${src_abs} ${headers} ${VIGIL_BPF_GEN_DIR}/vmlinux.h
    COMMENT "BPF ${name}.bpf.c"
    VERBATIM)
  set(${name}_BPF_OBJECT ${obj} PARENT_SCOPE)
endfunction()

function(bpf_object name source)
  bpf_compile(${name} ${source} ${VIGIL_BPF_GEN_DIR})
  set(obj ${${name}_BPF_OBJECT})
  set(skel ${VIGIL_BPF_GEN_DIR}/${name}.skel.h)
  get_filename_component(src_abs ${source} ABSOLUTE)
  get_filename_component(src_dir ${src_abs} DIRECTORY)
  add_custom_command(
    OUTPUT ${skel}
    COMMAND ${VIGIL_BPFTOOL} gen skeleton ${obj} name ${name}_bpf > ${skel}
    DEPENDS ${obj}
    COMMENT "Skeleton ${name}.skel.h"
    VERBATIM)
  add_custom_target(${name}_skel_gen DEPENDS ${skel})
  add_library(${name}_skel INTERFACE)
  add_dependencies(${name}_skel ${name}_skel_gen)
  # Every object, for checks of the bytecode (tests/agent: bpf_atomic_updates).
  set_property(GLOBAL APPEND PROPERTY VIGIL_BPF_OBJECTS ${obj})
  # Generated skeletons are C written for C; SYSTEM keeps our C++ warnings off them.
  target_include_directories(${name}_skel SYSTEM INTERFACE ${VIGIL_BPF_GEN_DIR})
  target_include_directories(${name}_skel INTERFACE ${src_dir})
  target_link_libraries(${name}_skel INTERFACE PkgConfig::LIBBPF)
endfunction()
