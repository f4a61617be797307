// test/model_buffers.h — host copies of a model's buffers for the tests, whatever device the
// model's backend runs on (model_get_params and friends, transformer.h).
#pragma once
#include <cstring>
#include <vector>

#include "transformer.h"

inline std::vector<float> host_params(const Model& m) {
    std::vector<float> v(m.layout.total);
    model_get_params(&m, v.data());
    return v;
}

inline std::vector<float> host_grads(const Model& m) {
    std::vector<float> v(m.layout.total);
    model_get_grads(&m, v.data());
    return v;
}

// Adam's m then v, one after the other (2 * layout.total floats).
inline std::vector<float> host_adam(const Model& m) {
    std::vector<float> v(2 * m.layout.total);
    model_get_adam(&m, v.data(), v.data() + m.layout.total);
    return v;
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
