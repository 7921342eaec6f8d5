# cmake -DIN=file -DOUT=header.h -DNAME=kName -P embed_file.cmake
# Writes `static const char NAME[] = {...};` holding IN's bytes and a terminating NUL, so the
# program carries the file (the chat page) with no run-time path.
file(READ "${IN}" _hex HEX)
string(LENGTH "${_hex}" _len)
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," _bytes "${_hex}")
# Break the initializer into lines of 24 bytes for the compiler's and a reader's sake.
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],){24})" "\\1\n  " _bytes "${_bytes}")
file(WRITE "${OUT}.tmp"
     "// Generated from ${IN} by tools/serve/embed_file.cmake. Do not edit.\n"
     "#pragma once\nstatic const char ${NAME}[] = {\n  ${_bytes}0x00};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
