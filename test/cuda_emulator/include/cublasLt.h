// Stands in for the CUDA Toolkit's cublasLt.h in the emulator build (../emulator.h says why).
#pragma once
#include "../emulator.h"
