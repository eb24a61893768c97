# cmake/hip.cmake — how packfa finds a HIP toolchain and builds .hip sources.
#
# Sets PACKFA_HIP_TOOLCHAIN_FOUND and defines
#   packfa_add_hip_library(<target> SOURCES <.hip...> INCLUDE_DIRS <dirs...> [DEFINES <defs...>])
# which makes a STATIC library from .hip sources compiled for ${PACKFA_HIP_TARGETS}, with an
# INTERFACE link to the HIP runtime (libamdhip64) so that its consumers link, and
#   packfa_add_hip_code_objects(<target> SOURCES <.hip...> INCLUDE_DIRS <dirs...> ARCHS <gfx...>
#                               OUTPUT_PREFIX <var> [DEFINES <defs...>])
# which compiles device code only (no host pass: the ISA gates' extra instance set) into offload
# bundles, one per (source, arch) so that the big units of several targets compile in parallel,
# built by the custom target <target>; <var>_<arch> receives each arch's bundle paths.
#
# Two paths:
#  * standard: a ROCm 6.x install whose hip-lang config CMake finds -> enable_language(HIP),
#    sources get LANGUAGE HIP, HIP_ARCHITECTURES = PACKFA_HIP_TARGETS. Nothing below the
#    "Debian shim" line is used then.
#  * Debian shim (Debian 12, no ROCm 6). Facts, found by trying:
#    - Debian's clang-19 (+ lld-19) compiles HIP for all six targets (gfx1100/1101/1102/1103,
#      gfx1151, gfx1201) against the ROCm 5.2 headers of libamdhip64-dev; clang-15/16 only
#      know gfx1100-1103. wave32 is the default on gfx11/gfx12.
#    - rocm-device-libs (ROCm 5.2) has no oclc_isa_version_{1100,1101,1102,1103,1151,1201}.bc,
#      so device code does not link. Each is one constant (major*1000 + minor*100 + stepping,
#      e.g. gfx1151 -> 11501): we generate them into the build tree from the .ll text of
#      oclc_isa_version_1030.bc (llvm-dis -> edit -> llvm-as) and point clang at a build-tree
#      folder holding symlinks to every system .bc plus the generated ones.
#    - CMake 3.25's HIP language looks for hip-lang under <root>/lib/cmake and misses Debian's
#      /usr/lib/x86_64-linux-gnu/cmake/hip-lang, so each .hip is compiled by a custom rule:
#      clang++-19 -x hip --offload-arch=<each target> -fno-gpu-rdc -c (ccache when present).
#  Override: -DPACKFA_HIP_SHIM=ON forces the shim, -DPACKFA_HIP_CLANG=<clang++> picks the compiler.
#
# Device code objects for the ISA gates (tests/isa): every object keeps its offload bundle
# in the .hip_fatbin section (both paths); tests/isa/check_hip_isa.py extracts it from the
# static library with llvm-objcopy + clang-offload-bundler, so no second compile is needed.

set(PACKFA_HIP_TOOLCHAIN_FOUND OFF)
set(PACKFA_HIP_MODE "none")  # standard | shim | none

if(NOT DEFINED PACKFA_HIP_TARGETS)
  set(_packfa_hip_archs "gfx1100;gfx1101;gfx1102;gfx1103;gfx1151;gfx1201")
else()
  set(_packfa_hip_archs "${PACKFA_HIP_TARGETS}")
endif()
option(PACKFA_HIP_SHIM "Compile .hip with the Debian clang custom rule even if CMake's HIP language works" OFF)

# ---- LLVM tools (used by both paths' ISA gates and by the shim) ---------------------------
# Prefer versioned Debian names, then ROCm's own LLVM.
set(_packfa_llvm_hints /opt/rocm/llvm/bin /usr/lib/llvm-19/bin)
if(DEFINED ENV{ROCM_PATH})
  list(PREPEND _packfa_llvm_hints $ENV{ROCM_PATH}/llvm/bin)
endif()
find_program(PACKFA_LLVM_OBJDUMP NAMES llvm-objdump-19 llvm-objdump HINTS ${_packfa_llvm_hints})
find_program(PACKFA_LLVM_READELF NAMES llvm-readelf-19 llvm-readelf HINTS ${_packfa_llvm_hints})
find_program(PACKFA_LLVM_OBJCOPY NAMES llvm-objcopy-19 llvm-objcopy HINTS ${_packfa_llvm_hints})
find_program(PACKFA_OFFLOAD_BUNDLER NAMES clang-offload-bundler-19 clang-offload-bundler HINTS ${_packfa_llvm_hints})
find_program(PACKFA_LLVM_CXXFILT NAMES llvm-cxxfilt-19 llvm-cxxfilt c++filt HINTS ${_packfa_llvm_hints})
mark_as_advanced(PACKFA_LLVM_OBJDUMP PACKFA_LLVM_READELF PACKFA_LLVM_OBJCOPY PACKFA_OFFLOAD_BUNDLER PACKFA_LLVM_CXXFILT)

# ---- standard path: CMake's HIP language (ROCm 6.x) ----------------------------------------
if(NOT PACKFA_HIP_SHIM AND NOT (DEFINED PACKFA_ENABLE_HIP AND NOT PACKFA_ENABLE_HIP))
  include(CheckLanguage)
  check_language(HIP)
  if(CMAKE_HIP_COMPILER)
    if(NOT DEFINED CMAKE_HIP_ARCHITECTURES)
      set(CMAKE_HIP_ARCHITECTURES "${_packfa_hip_archs}")
    endif()
    enable_language(HIP)
    find_package(hip CONFIG QUIET HINTS $ENV{ROCM_PATH} /opt/rocm)  # hip::host
    set(PACKFA_HIP_TOOLCHAIN_FOUND ON)
    set(PACKFA_HIP_MODE "standard")
  endif()
endif()

# ---- Debian shim ------------------------------------------------------------------------------
if(NOT PACKFA_HIP_TOOLCHAIN_FOUND AND NOT (DEFINED PACKFA_ENABLE_HIP AND NOT PACKFA_ENABLE_HIP))
  find_program(PACKFA_HIP_CLANG NAMES clang++-19 clang++-20 clang++-18
    HINTS /usr/lib/llvm-19/bin DOC "clang++ used to compile .hip sources (Debian shim)")
  find_path(PACKFA_HIP_INCLUDE_DIR hip/hip_runtime.h HINTS /usr/include /opt/rocm/include)
  find_path(PACKFA_ROCM_BITCODE_DIR ocml.bc
    HINTS /usr/lib/x86_64-linux-gnu/amdgcn/bitcode /usr/lib/amdgcn/bitcode /opt/rocm/amdgcn/bitcode
    NO_DEFAULT_PATH)
  find_library(PACKFA_AMDHIP64_LIBRARY amdhip64 HINTS /usr/lib/x86_64-linux-gnu /opt/rocm/lib)
  find_program(PACKFA_LLVM_DIS NAMES llvm-dis-19 llvm-dis HINTS ${_packfa_llvm_hints})
  find_program(PACKFA_LLVM_AS NAMES llvm-as-19 llvm-as HINTS ${_packfa_llvm_hints})
  find_program(PACKFA_CCACHE ccache)
  mark_as_advanced(PACKFA_HIP_CLANG PACKFA_HIP_INCLUDE_DIR PACKFA_ROCM_BITCODE_DIR PACKFA_AMDHIP64_LIBRARY
    PACKFA_LLVM_DIS PACKFA_LLVM_AS PACKFA_CCACHE)
  # clang's HIP driver runs clang-offload-bundler from its own bin folder (Debian: package
  # clang-tools-19); without it every .hip compile fails at the bundling step.
  set(_packfa_clang_bundler "")
  if(PACKFA_HIP_CLANG)
    get_filename_component(_packfa_clang_real ${PACKFA_HIP_CLANG} REALPATH)
    get_filename_component(_packfa_clang_dir ${_packfa_clang_real} DIRECTORY)
    if(EXISTS ${_packfa_clang_dir}/clang-offload-bundler)
      set(_packfa_clang_bundler ${_packfa_clang_dir}/clang-offload-bundler)
    else()
      message(STATUS "packfa HIP: ${_packfa_clang_dir}/clang-offload-bundler missing (Debian: clang-tools-19)")
    endif()
  endif()
  if(PACKFA_HIP_CLANG AND PACKFA_HIP_INCLUDE_DIR AND PACKFA_ROCM_BITCODE_DIR AND PACKFA_LLVM_DIS
     AND PACKFA_LLVM_AS AND PACKFA_AMDHIP64_LIBRARY AND _packfa_clang_bundler)
    set(PACKFA_HIP_TOOLCHAIN_FOUND ON)
    set(PACKFA_HIP_MODE "shim")
  endif()
endif()

if(PACKFA_HIP_MODE STREQUAL "standard")
  message(STATUS "packfa HIP: CMake HIP language (${CMAKE_HIP_COMPILER})")
elseif(PACKFA_HIP_MODE STREQUAL "shim")
  message(STATUS "packfa HIP: Debian shim (${PACKFA_HIP_CLANG}, device libs ${PACKFA_ROCM_BITCODE_DIR})")
else()
  message(STATUS "packfa HIP: no HIP toolchain found (Debian 12: apt-get install clang-19 clang-tools-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs)")
endif()

# Device-library folder for the shim: symlinks to every system .bc + generated ISA versions.
function(_packfa_hip_device_libs out_dir)
  set(dir ${CMAKE_BINARY_DIR}/packfa-hip-devlibs)
  get_property(done GLOBAL PROPERTY PACKFA_HIP_DEVLIBS_DONE)
  if(NOT done)
    file(MAKE_DIRECTORY ${dir})
    file(GLOB system_bc ${PACKFA_ROCM_BITCODE_DIR}/*.bc)
    foreach(bc ${system_bc})
      get_filename_component(name ${bc} NAME)
      if(NOT EXISTS ${dir}/${name})
        file(CREATE_LINK ${bc} ${dir}/${name} SYMBOLIC)
      endif()
    endforeach()
    set(template ${PACKFA_ROCM_BITCODE_DIR}/oclc_isa_version_1030.bc)
    foreach(arch ${PACKFA_HIP_TARGETS})
      string(REGEX MATCH "^gfx([0-9]+)([0-9a-f])([0-9a-f])$" m "${arch}")
      if(NOT m)
        message(FATAL_ERROR "packfa HIP: cannot parse offload target '${arch}'")
      endif()
      set(ver "${CMAKE_MATCH_1}${CMAKE_MATCH_2}${CMAKE_MATCH_3}")
      if(EXISTS ${PACKFA_ROCM_BITCODE_DIR}/oclc_isa_version_${ver}.bc OR EXISTS ${dir}/oclc_isa_version_${ver}.bc)
        continue()
      endif()
      if(NOT EXISTS ${template})
        message(FATAL_ERROR "packfa HIP: ${template} missing; cannot generate oclc_isa_version_${ver}.bc")
      endif()
      math(EXPR minor "0x${CMAKE_MATCH_2}")
      math(EXPR step "0x${CMAKE_MATCH_3}")
      math(EXPR isa "${CMAKE_MATCH_1} * 1000 + ${minor} * 100 + ${step}")
      execute_process(COMMAND ${PACKFA_LLVM_DIS} ${template} -o - OUTPUT_VARIABLE ll RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "packfa HIP: ${PACKFA_LLVM_DIS} ${template} failed")
      endif()
      string(REGEX REPLACE "(@__oclc_ISA_version = [^\n]* i32 )[0-9]+" "\\1${isa}" ll "${ll}")
      if(NOT ll MATCHES "i32 ${isa},")
        message(FATAL_ERROR "packfa HIP: unexpected text in ${template}")
      endif()
      file(WRITE ${dir}/oclc_isa_version_${ver}.ll "${ll}")
      execute_process(COMMAND ${PACKFA_LLVM_AS} ${dir}/oclc_isa_version_${ver}.ll -o ${dir}/oclc_isa_version_${ver}.bc
        RESULT_VARIABLE rc)
      if(NOT rc EQUAL 0)
        message(FATAL_ERROR "packfa HIP: ${PACKFA_LLVM_AS} failed for oclc_isa_version_${ver}")
      endif()
      message(STATUS "packfa HIP: generated oclc_isa_version_${ver}.bc (__oclc_ISA_version = ${isa})")
    endforeach()
    set_property(GLOBAL PROPERTY PACKFA_HIP_DEVLIBS_DONE ON)
  endif()
  set(${out_dir} ${dir} PARENT_SCOPE)
endfunction()

# Every .hip compile of packfa (library and ISA-gate code objects) defines these.
set(_packfa_hip_defines __HIP_PLATFORM_AMD__=1 PACKFA_PDL=0)
set(_packfa_hip_launcher)
if(PACKFA_CCACHE)
  set(_packfa_hip_launcher ${PACKFA_CCACHE})
endif()

# Compiler flags of a clang HIP compile written as a custom rule (shim library, code objects):
# one list, so the library and the ISA gates' code objects cannot drift apart. No offload
# arch: the callers add theirs.
function(_packfa_hip_flags out)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "" "DEFINES;INCLUDE_DIRS")
  set(flags)
  if(PACKFA_HIP_MODE STREQUAL "shim")
    _packfa_hip_device_libs(devlibs)
    set(flags --rocm-device-lib-path=${devlibs})
  endif()
  list(APPEND flags -x hip -std=c++17 -O3 -fPIC -fno-gpu-rdc)
  foreach(d ${_packfa_hip_defines} ${A_DEFINES})
    list(APPEND flags -D${d})
  endforeach()
  foreach(dir ${A_INCLUDE_DIRS})
    list(APPEND flags -I${dir})
  endforeach()
  set(${out} ${flags} PARENT_SCOPE)
endfunction()

function(packfa_add_hip_library target)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "" "SOURCES;INCLUDE_DIRS;DEFINES")
  if(NOT PACKFA_HIP_TOOLCHAIN_FOUND)
    message(FATAL_ERROR "packfa_add_hip_library(${target}): no HIP toolchain (see cmake/hip.cmake)")
  endif()
  if(PACKFA_HIP_MODE STREQUAL "standard")
    set_source_files_properties(${A_SOURCES} PROPERTIES LANGUAGE HIP)
    add_library(${target} STATIC ${A_SOURCES})
    set_target_properties(${target} PROPERTIES HIP_ARCHITECTURES "${PACKFA_HIP_TARGETS}"
      HIP_STANDARD 17 HIP_STANDARD_REQUIRED ON POSITION_INDEPENDENT_CODE ON)
    target_include_directories(${target} PRIVATE ${A_INCLUDE_DIRS})
    target_compile_definitions(${target} PRIVATE ${_packfa_hip_defines} ${A_DEFINES})
    target_compile_options(${target} PRIVATE -O3 -fno-gpu-rdc)
    if(TARGET hip::host)
      target_link_libraries(${target} INTERFACE hip::host)
    else()
      find_library(PACKFA_AMDHIP64_LIBRARY amdhip64 HINTS /opt/rocm/lib)
      target_link_libraries(${target} INTERFACE ${PACKFA_AMDHIP64_LIBRARY})
    endif()
    return()
  endif()

  # ---- Debian shim: one custom rule per source ----
  _packfa_hip_flags(flags DEFINES ${A_DEFINES} INCLUDE_DIRS ${A_INCLUDE_DIRS})
  foreach(arch ${PACKFA_HIP_TARGETS})
    list(APPEND flags --offload-arch=${arch})
  endforeach()
  set(objects)
  foreach(src ${A_SOURCES})
    get_filename_component(abs ${src} ABSOLUTE)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${abs})
    string(REGEX REPLACE "[^A-Za-z0-9_.]" "_" stem "${rel}")
    set(obj ${CMAKE_CURRENT_BINARY_DIR}/${target}.hip/${stem}.o)
    # Per-source settings (e.g. PACKFA_LEAN_INSTANCES from cmake/kernels.cmake) apply here too.
    set(src_flags)
    get_source_file_property(src_defs ${src} COMPILE_DEFINITIONS)
    if(src_defs)
      foreach(d ${src_defs})
        list(APPEND src_flags -D${d})
      endforeach()
    endif()
    get_source_file_property(src_opts ${src} COMPILE_OPTIONS)
    if(src_opts)
      list(APPEND src_flags ${src_opts})
    endif()
    add_custom_command(OUTPUT ${obj}
      COMMAND ${_packfa_hip_launcher} ${PACKFA_HIP_CLANG} ${flags} ${src_flags} -MD -MF ${obj}.d -c ${abs} -o ${obj}
      MAIN_DEPENDENCY ${abs}
      DEPFILE ${obj}.d
      COMMENT "HIP ${rel} (${PACKFA_HIP_TARGETS})"
      VERBATIM COMMAND_EXPAND_LISTS)
    list(APPEND objects ${obj})
  endforeach()
  set_source_files_properties(${objects} PROPERTIES EXTERNAL_OBJECT ON GENERATED ON)
  add_library(${target} STATIC ${objects})
  set_target_properties(${target} PROPERTIES LINKER_LANGUAGE CXX)
  target_link_libraries(${target} INTERFACE ${PACKFA_AMDHIP64_LIBRARY})
endfunction()

# Device code only, one offload bundle per (source, arch), for the ISA gates (nothing links these).
function(packfa_add_hip_code_objects target)
  cmake_parse_arguments(PARSE_ARGV 1 A "" "OUTPUT_PREFIX" "SOURCES;INCLUDE_DIRS;DEFINES;ARCHS")
  if(NOT PACKFA_HIP_TOOLCHAIN_FOUND OR NOT A_ARCHS OR NOT A_OUTPUT_PREFIX)
    message(FATAL_ERROR "packfa_add_hip_code_objects(${target} SOURCES .. ARCHS <gfx..> OUTPUT_PREFIX <var>): needs a HIP toolchain")
  endif()
  if(PACKFA_HIP_MODE STREQUAL "shim")
    set(compiler ${PACKFA_HIP_CLANG})
  else()
    set(compiler ${CMAKE_HIP_COMPILER})
  endif()
  _packfa_hip_flags(flags DEFINES ${A_DEFINES} INCLUDE_DIRS ${A_INCLUDE_DIRS})  # the library's flags
  list(APPEND flags --cuda-device-only)
  set(all)
  foreach(arch ${A_ARCHS})
    set(objects)
    foreach(src ${A_SOURCES})
      get_filename_component(abs ${src} ABSOLUTE)
      get_filename_component(stem ${src} NAME_WE)
      set(obj ${CMAKE_CURRENT_BINARY_DIR}/${target}/${arch}/${stem}.co)
      add_custom_command(OUTPUT ${obj}
        COMMAND ${_packfa_hip_launcher} ${compiler} ${flags} --offload-arch=${arch} -MD -MF ${obj}.d -c ${abs} -o ${obj}
        MAIN_DEPENDENCY ${abs}
        DEPFILE ${obj}.d
        COMMENT "HIP device code ${stem} (${arch})"
        VERBATIM COMMAND_EXPAND_LISTS)
      list(APPEND objects ${obj})
    endforeach()
    set(${A_OUTPUT_PREFIX}_${arch} ${objects} PARENT_SCOPE)
    list(APPEND all ${objects})
  endforeach()
  add_custom_target(${target} ALL DEPENDS ${all})
endfunction()
