// Stands in for CUB's cub.cuh in the emulator build (../../emulator.h says why).
#pragma once
#include "../../emulator.h"
