#include "pdl_host.cu"
