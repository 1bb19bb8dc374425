# Cross-compiling nnpipe's engine, tools, reference NNAPI driver and tests for aarch64 Linux
# with Debian's g++-aarch64-linux-gnu, against a sysroot of Debian arm64 packages unpacked
# with dpkg -x (bench/aarch64.sh builds it; nothing of arm64 is installed on the host).
# Binaries run under qemu-user: CMake's emulator setting makes ctest and gtest discovery
# go through it.
#   cmake -S . -B build-aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake \
#         -DNN_AARCH64_SYSROOT=/path/to/sysroot
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT NN_AARCH64_SYSROOT)
  if(DEFINED ENV{NN_AARCH64_SYSROOT})
    set(NN_AARCH64_SYSROOT "$ENV{NN_AARCH64_SYSROOT}")
  else()
    set(NN_AARCH64_SYSROOT "${CMAKE_CURRENT_LIST_DIR}/../build-aarch64-sysroot/root")
  endif()
endif()
get_filename_component(NN_AARCH64_SYSROOT "${NN_AARCH64_SYSROOT}" ABSOLUTE)
if(NOT EXISTS "${NN_AARCH64_SYSROOT}/usr/include/xnnpack.h")
  message(FATAL_ERROR "no aarch64 sysroot at ${NN_AARCH64_SYSROOT}: run bench/aarch64.sh (it builds one)")
endif()
# try_compile projects re-read this file: hand them the same sysroot.
set(ENV{NN_AARCH64_SYSROOT} "${NN_AARCH64_SYSROOT}")
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES NN_AARCH64_SYSROOT)

set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_SYSROOT "${NN_AARCH64_SYSROOT}")
# Debian's libraries sit in both /lib and /usr/lib of the sysroot (no usrmerge in .debs);
# rpath-link lets ld follow their DT_NEEDED chains there.
set(_nn_libdirs "${NN_AARCH64_SYSROOT}/lib/aarch64-linux-gnu" "${NN_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu")
foreach(dir ${_nn_libdirs})
  string(APPEND CMAKE_EXE_LINKER_FLAGS_INIT " -Wl,-rpath-link,${dir}")
  string(APPEND CMAKE_SHARED_LINKER_FLAGS_INIT " -Wl,-rpath-link,${dir}")
endforeach()

set(CMAKE_FIND_ROOT_PATH "${NN_AARCH64_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)   # host tools (glslc, protoc, python)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Debian ships OpenCV's CMake config only in libopencv-dev, which pulls in every module
# (VTK, Qt, ...): cmake/aarch64/ holds a config for the three modules the tools use.
set(OpenCV_DIR "${CMAKE_CURRENT_LIST_DIR}/aarch64" CACHE PATH "OpenCV (core, imgproc, imgcodecs) in the sysroot")

set(ENV{PKG_CONFIG_SYSROOT_DIR} "${NN_AARCH64_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${NN_AARCH64_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${NN_AARCH64_SYSROOT}/usr/share/pkgconfig")

find_program(NN_QEMU_AARCH64 qemu-aarch64 REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR "${NN_QEMU_AARCH64};-L;${NN_AARCH64_SYSROOT}")
