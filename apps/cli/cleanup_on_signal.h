// For commands that write output files (convert, synth): Ctrl-C or a kill while writing removes
// the temporary file (core/output_file.h) before the process ends with the signal's usual status.
#pragma once

namespace cera::cli {

void remove_partial_outputs_on_signal();

}  // namespace cera::cli
