#include "dispatch.cu"  // the same dispatcher, compiled for HIP
