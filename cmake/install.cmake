# install.cmake - `cmake --install build --prefix P`: the static libraries, the public headers,
# the programs, CMake packages (find_package(ggml) and find_package(llama) give the imported
# targets `ggml` and `llama`, as llama.cpp's packages name them) and pkg-config files.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(LLAMA_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake)

install(TARGETS ggml EXPORT ggml-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/ggml/include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(EXPORT ggml-targets FILE ggml-targets.cmake DESTINATION ${LLAMA_CMAKE_DIR}/ggml)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ggml-config.cmake.in ${PROJECT_BINARY_DIR}/ggml-config.cmake
                              INSTALL_DESTINATION ${LLAMA_CMAKE_DIR}/ggml)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ggml-config-version.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ggml-config.cmake ${PROJECT_BINARY_DIR}/ggml-config-version.cmake
        DESTINATION ${LLAMA_CMAKE_DIR}/ggml)

if (TARGET llama)
    install(TARGETS llama EXPORT llama-targets ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
    install(FILES ${PROJECT_SOURCE_DIR}/src/llama.h ${PROJECT_SOURCE_DIR}/src/llama-cpp.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
    install(EXPORT llama-targets FILE llama-targets.cmake DESTINATION ${LLAMA_CMAKE_DIR}/llama)
    configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/llama-config.cmake.in ${PROJECT_BINARY_DIR}/llama-config.cmake
                                  INSTALL_DESTINATION ${LLAMA_CMAKE_DIR}/llama)
    write_basic_package_version_file(${PROJECT_BINARY_DIR}/llama-config-version.cmake COMPATIBILITY SameMinorVersion)
    install(FILES ${PROJECT_BINARY_DIR}/llama-config.cmake ${PROJECT_BINARY_DIR}/llama-config-version.cmake
            DESTINATION ${LLAMA_CMAKE_DIR}/llama)
endif()

# pkg-config: the libraries are static, so their own dependencies are listed in Libs (with the
# sanitizer runtimes of a sanitized build: GGML_SANITIZE_LINK_FLAGS, top CMakeLists.txt).
set(GGML_PC_LIBS_EXTRA "")
foreach(flag ${GGML_SANITIZE_LINK_FLAGS})
    string(APPEND GGML_PC_LIBS_EXTRA " ${flag}")
endforeach()
if (GGML_CUDA)
    set(GGML_PC_LIBS_EXTRA "${GGML_PC_LIBS_EXTRA} -L${CUDAToolkit_LIBRARY_DIR} -lcublas -lcudart")
endif()
foreach(pc ggml llama)
    if (TARGET ${pc})
        configure_file(${CMAKE_CURRENT_LIST_DIR}/${pc}.pc.in ${PROJECT_BINARY_DIR}/${pc}.pc @ONLY)
        install(FILES ${PROJECT_BINARY_DIR}/${pc}.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
    endif()
endforeach()

# The programs people use.
foreach(prog llama-cli llama-quantize llama-convert llama-finetune llama-export-lora llama-bench llama-perplexity
             llama-tokenize llama-logits llama-simple)
    if (TARGET ${prog})
        install(TARGETS ${prog} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
    endif()
endforeach()
