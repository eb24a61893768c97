// PTX source for the static checker's self-test (tests/isa/pdl.cmake): every good kernel and
// every planted bug of pdl_test_kernels.cuh.
#include "pdl_test_kernels.cuh"
