# cmake -DIN=file -DOUT=header -DNAME=symbol -P embed.cmake: the bytes of IN as a C++ array
# (NAME, NAME_len) in OUT, so that llama-server serves its page from the binary (no path from a
# request to the file system).
file(READ ${IN} hex HEX)
string(LENGTH "${hex}" n)
math(EXPR len "${n} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE ${OUT} "// Generated from ${IN} by embed.cmake.\n#pragma once\n#include <cstddef>\n"
                  "static const unsigned char ${NAME}[] = {${bytes}0x00};\nstatic const size_t ${NAME}_len = ${len};\n")
