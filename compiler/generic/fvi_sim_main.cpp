// fvi-sim MODEL.fvi --data DIR --output OUT [options]: NAME-sim for any model, compiled at start
// (what `fvic run` does; the options are NAME-sim's, `fvi-sim MODEL.fvi --help`).
#include "generic/compiled_model.h"

int main(int argc, char** argv) { return fvic::generic::run_role(argc, argv, "fvi-sim", fvi::program::run_sim); }
