// flashlab: FlashAttention three ways (exact CPU numerics, a memory simulator, CUDA kernels).
#include "cli.hpp"

int main(int argc, char** argv) { return flashlab::app::run_cli(argc, argv); }
