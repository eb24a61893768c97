// packfa-cli subcommands implemented over the CPU core (packfa_core).
// Called as f(argc - 1, argv + 1): argv[0] is the subcommand name, options follow. Options are
// parsed strictly (src/cli/args.hpp): a bad value, an unknown option or a surplus argument
// prints an error naming it and returns 2; --help prints the usage and returns 0.
#pragma once

// packfa-cli quality [--d 128] [--kv 4096] [--queries 64] [--kv-heads 4] [--seed 1]:
// attention-level quality of packed16 K (docs/quality.md). 0, 1 (failure) or 2 (bad options).
int packfa_cli_quality(int argc, char** argv);

// packfa-cli plan [--model NAME | --layers L --kv-heads H --head-dim D] [--context N]
// [--contexts C] [--v q4_0|q8_0|q8_0_planar|f16|bf16|all] [--swa-full] [--list]: KV cache GiB.
int packfa_cli_plan(int argc, char** argv);
