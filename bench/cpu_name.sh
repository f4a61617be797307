#!/bin/sh
# bench/cpu_name.sh -- the CPU's name for the benchmarks' "# CPU:" lines: its model name, family
# and model numbers, and the microarchitecture where the numbers say it. A VM's model name is
# often just "AMD EPYC", which does not tell a Zen 4 from a Zen 5 (their fp32 peaks differ by
# 2x), so a table's machine is named from these numbers, not from memory.
#
#   sh bench/cpu_name.sh              # AMD EPYC (family 26 model 2: Zen 5)
#   sh bench/cpu_name.sh FILE         # the same from a saved /proc/cpuinfo (tests)
awk -F': *' '
    /^vendor_id/ && vendor == "" { vendor = $2 }
    /^cpu family/ && family == "" { family = $2 + 0 }
    /^model[ \t]*:/ && model == "" { model = $2 + 0 }
    /^model name/ && name == "" { name = $2 }
    function between(lo, hi) { return model >= lo && model <= hi }
    function arch() {
        if (vendor == "AuthenticAMD" && family == 23) return model >= 48 ? "Zen 2" : "Zen or Zen+"
        if (vendor == "AuthenticAMD" && family == 25)
            return between(16, 31) || between(96, 127) || between(160, 175) ? "Zen 4" : "Zen 3"
        if (vendor == "AuthenticAMD" && family == 26 && (model < 80 || between(96, 127))) return "Zen 5"
        if (vendor == "GenuineIntel" && family == 6) {
            if (model == 85) return "Skylake, Cascade Lake or Cooper Lake server"
            if (model == 106 || model == 108) return "Ice Lake server"
            if (model == 143) return "Sapphire Rapids"
            if (model == 207) return "Emerald Rapids"
            if (model == 173 || model == 174) return "Granite Rapids"
        }
        return ""
    }
    END {
        if (name == "") name = "unknown CPU"
        if (family == "") { print name; exit }
        a = arch()
        printf "%s (family %d model %d%s)\n", name, family, model, a == "" ? "" : ": " a
    }' "${1:-/proc/cpuinfo}"
