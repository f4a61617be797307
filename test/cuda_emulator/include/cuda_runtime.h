// Stands in for the CUDA Toolkit's cuda_runtime.h in the emulator build (../emulator.h says why).
#pragma once
#include "../emulator.h"
