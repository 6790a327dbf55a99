# -*- Python -*-
import os
import shutil
import sys

from lit.llvm import llvm_config

# The test format lives in a module, not here: lit's worker processes
# unpickle it by name.
sys.path.insert(0, os.path.dirname(__file__))
from pp_lit_format import ShTestRemovingPassedOutputs  # noqa: E402


config.name = "PIPELINE_OPT"
config.test_format = ShTestRemovingPassedOutputs(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".test"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.pp_obj_root, "test")
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "unittests"]

config.substitutions.append(("%models", config.pp_models_dir))
config.substitutions.append(
    ("%clusters", os.path.join(config.test_source_root, "Cluster", "Inputs")))
config.substitutions.append(("%python3", config.python3))
config.substitutions.append(("%pp_src", config.pp_src_root))
config.substitutions.append(("%pp_obj", config.pp_obj_root))
config.substitutions.append(("%onnx_testdata", config.onnx_testdata_dir))
# --cuda: the end-to-end checks also build each model's program with nvcc.
config.substitutions.append(
    ("%cuda_flag", "--cuda" if config.pp_cuda_programs == "1" else ""))
config.substitutions.append(
    ("%mpirun", (config.mpirun or "mpirun") +
     " --allow-run-as-root --oversubscribe"))

llvm_config.use_default_substitutions()
llvm_config.with_environment("PATH", config.pp_tools_dir, append_path=True)
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# OpenBLAS's kernel choice: machines whose CPU an older OpenBLAS misdetects
# set OPENBLAS_CORETYPE (and OPENBLAS_L2_SIZE); lit clears the environment,
# and without them the GEMMs of the tests run other (there: wrong) kernels.
for name in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE", "OPENBLAS_VERBOSE"):
    if name in os.environ:
        config.environment[name] = os.environ[name]
llvm_config.add_tool_substitutions(["pipeline-opt", "pp-interpret"], [config.pp_tools_dir])
# Generated programs built by the tests (python/check_generated.py's build):
# -O1 compiles them in about half Release's time (GPT: 3.5 s against 6.4)
# and runs them about as fast, their kernels being in the prebuilt runtime.
config.environment["PP_PROGRAM_OPT"] = "1"
# Many tests export the same test model at the same batch sizes
# (python/check_pipeline.py's export_micro_and_whole): exported once a run.
config.environment["PP_EXPORT_CACHE"] = os.path.join(
    config.pp_obj_root, "test", "export-cache")
# ...through ccache where there is one: many tests build the same program
# (the same model and plan), in this run and the runs before it. Paths are
# hashed relative to the source tree, so a fresh clone elsewhere hits too.
if shutil.which("ccache"):
    config.environment["PP_PROGRAM_CCACHE"] = "1"
    config.environment["CCACHE_BASEDIR"] = config.pp_src_root
    for name in ("CCACHE_DIR", "CCACHE_DISABLE", "HOME", "XDG_CACHE_HOME"):
        if name in os.environ:
            config.environment[name] = os.environ[name]
# The long tier (files with `REQUIRES: long-tests`): scripts/test-long.sh
# sets PP_LONG_TESTS=1; the test command leaves them out.
if os.environ.get("PP_LONG_TESTS") == "1":
    config.available_features.add("long-tests")
