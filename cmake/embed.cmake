# Writes the bytes of IN as a C array named NAME (with NAME_len) into OUT:
# cmake -DIN=... -DOUT=... -DNAME=... -P embed.cmake. The run browser's page
# (src/ui/page.html) is shipped in the binary this way.
file(READ "${IN}" hex HEX)
string(LENGTH "${hex}" n_hex)
math(EXPR n "${n_hex} / 2")
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," body "${hex}")
string(REGEX REPLACE "(0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,0x..,)" "\\1\n" body "${body}")
file(WRITE "${OUT}.tmp" "/* Generated from ${IN} by cmake/embed.cmake; do not edit. */\n#include <stddef.h>\nconst char ${NAME}[] = {\n${body}0x00};\nconst size_t ${NAME}_len = ${n};\n")
file(RENAME "${OUT}.tmp" "${OUT}")
