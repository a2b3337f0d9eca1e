# check.cmake - installs the build tree into a prefix, then builds the downstream project against
# it twice (find_package, and the plain compiler line with pkg-config's flags) and runs both.
# cmake -DBUILD_DIR=... -DWORK_DIR=... -DSRC_DIR=... -DMODEL=... -DCC=... [-DLINK_EXTRA=...] -P check.cmake
# (LINK_EXTRA: flags a sanitized build's libraries need at link time, as ggml.pc lists them).
function(run)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if (NOT rc EQUAL 0)
        message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
    endif()
    set(LAST_OUT "${out}" PARENT_SCOPE)
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix})
foreach(f include/llama.h include/llama-cpp.h include/ggml.h include/ggml-cpp.h include/ggml-cpu.h lib/libllama.a lib/libggml.a lib/cmake/llama/llama-config.cmake
          lib/cmake/ggml/ggml-config.cmake lib/pkgconfig/llama.pc lib/pkgconfig/ggml.pc bin/llama-cli bin/llama-quantize)
    if (NOT EXISTS ${prefix}/${f})
        message(FATAL_ERROR "not installed: ${f}")
    endif()
endforeach()

run(${CMAKE_COMMAND} -S ${SRC_DIR} -B ${WORK_DIR}/build -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release)
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
run(${WORK_DIR}/build/downstream ${MODEL})
string(STRIP "${LAST_OUT}" text)
if (text STREQUAL "")
    message(FATAL_ERROR "the find_package build generated nothing")
endif()
message(STATUS "find_package build generated: ${text}")

# The llama.cpp common-style program (registry, thread pool, several sequences, KV cache view): it
# checks itself; its greedy text from the same prompt must be the C program's.
run(${WORK_DIR}/build/common-style ${MODEL})
string(STRIP "${LAST_OUT}" text_cs)
string(FIND "${text}" "${text_cs}" at)
string(FIND "${text_cs}" "${text}" at2)
if (text_cs STREQUAL "" OR (at EQUAL -1 AND at2 EQUAL -1))
    message(FATAL_ERROR "common-style generated '${text_cs}', the C program '${text}' (one should begin the other)")
endif()
message(STATUS "common-style build generated: ${text_cs}")

# The plain compiler line: what the README shows.
run(${CC} ${SRC_DIR}/main.c -I${prefix}/include ${prefix}/lib/libllama.a ${prefix}/lib/libggml.a -lstdc++ -lpthread -lm
    ${LINK_EXTRA} -o ${WORK_DIR}/plain)
run(${WORK_DIR}/plain ${MODEL})
string(STRIP "${LAST_OUT}" text2)
if (NOT text2 STREQUAL text)
    message(FATAL_ERROR "the plain build generated '${text2}', the find_package build '${text}'")
endif()
