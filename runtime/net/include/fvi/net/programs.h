#pragma once
// The mains of NAME-server and NAME-client (fvic build emits a one-line main for each):
//   NAME-server --listen HOST:PORT --silos S --data DIR --output OUT [options]
//   NAME-client --server HOST:PORT --silo K --data DIR [--output OUT] [options]
// `--help` lists the options; docs/deployment.md explains them.
#include "fvi/program/sim.h"

namespace fvi::net {

int run_server(const fvi_model& model, const program::ModelDescription& description, int argc, char** argv);
int run_client(const fvi_model& model, const program::ModelDescription& description, int argc, char** argv);

}  // namespace fvi::net
