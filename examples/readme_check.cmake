# cmake -P: README.md must contain EXAMPLE's text verbatim (inside its ```cpp block).
file(READ ${README} readme)
file(READ ${EXAMPLE} example)
string(FIND "${readme}" "```cpp\n${example}```" at)
if(at EQUAL -1)
  message(FATAL_ERROR "README.md does not show ${EXAMPLE} verbatim in a ```cpp block: copy the file into the README")
endif()
message(STATUS "README.md shows ${EXAMPLE} verbatim")
