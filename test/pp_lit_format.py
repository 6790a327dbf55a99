"""pipeline-opt's lit test format."""
import glob
import os
import shutil

import lit.formats
import lit.TestRunner


class ShTestRemovingPassedOutputs(lit.formats.ShTest):
    """Deletes a test's outputs (%t and every %t.*) once it has passed.

    resnet18's programs, checkpoints and weight files are about 90 MB a copy,
    and the suite's outputs otherwise add up to 8 GB: more than a CI machine's
    free disk. A failing test keeps its outputs to be looked at, and so does
    every test when PP_KEEP_TEST_OUTPUTS=1."""

    def execute(self, test, lit_config):
        result = super().execute(test, lit_config)
        if result.code.isFailure or os.environ.get("PP_KEEP_TEST_OUTPUTS") == "1":
            return result
        _, tmp_base = lit.TestRunner.getTempPaths(test)
        for path in glob.glob(glob.escape(tmp_base) + ".tmp*"):
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path, ignore_errors=True)
            else:
                os.remove(path)
        return result
