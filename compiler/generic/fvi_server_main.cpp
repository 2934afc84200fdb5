// fvi-server MODEL.fvi --listen HOST:PORT --silos S --data DIR --output OUT [options]: NAME-server
// for any model, compiled at start. Each silo that joins is sent the model's text and SHA-256
// (docs/deployment.md, "One program per role"); the options are NAME-server's.
#include "fvi/net/programs.h"
#include "generic/compiled_model.h"

int main(int argc, char** argv) { return fvic::generic::run_role(argc, argv, "fvi-server", fvi::net::run_server); }
