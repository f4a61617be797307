// cli/average.cpp — ./average: averages checkpoints of one model element by element (the
// paper's recipe: the last 5 checkpoints of a run), writing a checkpoint that ./translate reads.
//
//   ./average --out avg.safetensors runs/default/ckpt-*.safetensors
// Inputs whose configs or tokenizers differ are refused, naming the first difference.
#include <cstdio>
#include <string>
#include <vector>

#include "cli/options.h"
#include "toolkit/trainer.h"

int main(int argc, char** argv) {
    std::string out;
    Options o("average", "Averages the parameters of checkpoints of the same model (fp32 result).");
    o.usage_suffix(" CHECKPOINT...");
    o.add("--out", &out, "the averaged checkpoint to write", "FILE");
    std::vector<std::string> inputs;
    if (!o.parse(argc, argv, &inputs)) return o.exit_code();
    if (out.empty() || inputs.empty()) {
        std::fprintf(stderr, "average: need --out FILE and at least one checkpoint (see --help)\n");
        return 2;
    }
    std::string err;
    if (!average_checkpoints(inputs, out, &err)) {
        std::fprintf(stderr, "average: %s\n", err.c_str());
        return 1;
    }
    std::printf("averaged %zu checkpoints -> %s\n", inputs.size(), out.c_str());
    return 0;
}
