# lit configuration of tinymlir's pass tests (tests/passes/*.mlir): each file's RUN lines run
# tinymlir-opt and FileCheck, whose paths come from lit parameters (tests/passes/CMakeLists.txt
# passes them):
#   lit -v tests/passes --param tinymlir_opt=<tinymlir-opt> --param filecheck=<FileCheck> \
#       --param exec_root=<a folder for lit's output>
import os

import lit.formats

config.name = "tinymlir-passes"
config.test_format = lit.formats.ShTest(True)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(os.path.abspath(__file__))


def required_param(name, what):
    value = lit_config.params.get(name)
    if not value:
        lit_config.fatal(
            f"tinymlir-passes: missing --param {name}=<{what}> "
            "(tests/passes/CMakeLists.txt's CTest test pass_filecheck_tests passes it)")
    return value


config.test_exec_root = required_param("exec_root", "a folder for lit's output")

tools = {
    "tinymlir-opt": required_param("tinymlir_opt", "path of tinymlir-opt"),
    "FileCheck": required_param("filecheck", "path of LLVM's FileCheck"),
}
for name, path in tools.items():
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        lit_config.fatal(f"tinymlir-passes: {name} is not an executable file: {path}")
    # The tool's name as a word of its own in a RUN line: not inside a path, an option
    # (--check-prefix), or a longer name.
    config.substitutions.append((rf"(?<![\w./-]){name}(?![\w./-])", path))
