# Included at the end of project() by scripts/run-tsan.sh (CMAKE_PROJECT_INCLUDE): a
# ThreadSanitizer build of what runs on several threads -- the runtime (Session,
# AsyncSession), the GStreamer plugin and the tests that drive them. The kernels, importers
# and delegates run inside one inference (their threads are pthreadpool's, which TSan
# cannot follow: it synchronises with futexes) and stay uninstrumented, compiled exactly as
# in the normal build, so a warm ccache builds only the instrumented part.
add_link_options(-fsanitize=thread)

function(nn_tsan_instrument)
  set(flags -fsanitize=thread -fno-omit-frame-pointer)
  # The runtime's sources, in the engine's directory scope.
  get_target_property(sources nnengine SOURCES)
  set(runtime)
  foreach(src IN LISTS sources)
    if(src MATCHES "/engine/runtime/[^/]+\\.cpp$")
      list(APPEND runtime ${src})
    endif()
  endforeach()
  set_property(SOURCE ${runtime} DIRECTORY ${CMAKE_SOURCE_DIR}/engine APPEND PROPERTY COMPILE_OPTIONS ${flags})
  foreach(target gstnnpipe nnmaskmeta nncompositor nnimageops nnimage nntestsupport async_session_test segmenter_test
                 nnsegment_test nnbackground_test nnsegment_classes_test maskmeta_test)
    if(TARGET ${target})
      target_compile_options(${target} PRIVATE ${flags})
    endif()
  endforeach()
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL nn_tsan_instrument)
