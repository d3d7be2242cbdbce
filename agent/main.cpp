#include "agent/cli.hpp"

int main(int argc, char** argv) { return ferry::agent::run_cli(argc, argv); }
