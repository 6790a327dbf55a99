// The program of lower-to-emitc.mlir's two-stage module, with budgets so
// small that every stage function is cut: parts of about 6 ops called in
// order, each recomputing the views it uses (not passing them), translation
// units of about 1500 bytes that include program.h, a fused kernel in the
// unit of the part that launches it, the table and main in program.cpp,
// every unit in CMakeLists.txt. Compiled again into the same directory
// without budgets it is one unit, and the units of the first program are
// gone.
//
// RUN: rm -rf %t && pipeline-opt %S/../../Conversion/PPToEmitC/lower-to-emitc.mlir --pp-fuse-elementwise --pp-memory-plan --pp-emit-program="dir=%t max-function-ops=6 max-tu-bytes=1500 summary=-" -o /dev/null | FileCheck %s --check-prefix=SUMMARY
// RUN: FileCheck %s --check-prefix=HEADER < %t/program.h
// RUN: FileCheck %s --check-prefix=UNIT1 < %t/program_1.cpp
// RUN: FileCheck %s --check-prefix=FUSED < %t/program_4.cpp
// RUN: FileCheck %s --check-prefix=TABLE < %t/program.cpp
// RUN: FileCheck %s --check-prefix=CMAKE < %t/CMakeLists.txt
// RUN: pipeline-opt %S/../../Conversion/PPToEmitC/lower-to-emitc.mlir --pp-fuse-elementwise --pp-memory-plan --pp-emit-program="dir=%t max-function-ops=0 max-tu-bytes=0 summary=-" -o /dev/null | FileCheck %s --check-prefix=WHOLE
// RUN: not test -e %t/program_1.cpp
// RUN: FileCheck %s --check-prefix=WHOLE-CPP < %t/program.cpp

// SUMMARY: == program: {{.*}} ==
// SUMMARY-NEXT: 7 translation units, {{[0-9]+}} KB of C++ (largest 4 KB, budget 1 KB), 14 stage functions and parts (largest {{[0-9]+}} ops, budget 6); data 1 KB
// SUMMARY-NEXT: build: cmake -S [[DIR:.*]] -B [[DIR]]/build -G Ninja && cmake --build [[DIR]]/build

// HEADER: #pragma once
// HEADER-NEXT: #include "pp/Runtime/Generated.h"
// HEADER-NEXT: #include <limits>
// HEADER-NEXT: extern void stage0_forward_part0(pp::rt::StageContext&, int64_t);
// HEADER-NEXT: extern void stage0_forward_part1(pp::rt::StageContext&, int64_t);
// HEADER-NEXT: extern void stage0_forward(pp::rt::StageContext&, int64_t);

// The input is read into its stash's buffer (stashTarget); the next part
// asks for that buffer again and gets the same one.
// UNIT1: #include "program.h"
// UNIT1-NEXT: void stage0_forward_part0(pp::rt::StageContext& [[CTX:v[0-9]+]], int64_t [[MB:v[0-9]+]]) {
// UNIT1: pp::rt::Tensor [[XV:v[0-9]+]] = pp::rt::gen::view([[CTX]], 0, pp::rt::DType::F32, {4, 8});
// UNIT1-NEXT: pp::rt::Tensor [[X:v[0-9]+]] = pp::rt::gen::stashTarget([[CTX]], 0, [[MB]], [[XV]]);
// UNIT1-NEXT: pp::rt::gen::input([[CTX]], 0, [[MB]], [[X]]);
// UNIT1: return;
// UNIT1-NEXT: }
// UNIT1-NEXT: void stage0_forward_part1(pp::rt::StageContext& [[CTX1:v[0-9]+]], int64_t [[MB1:v[0-9]+]]) {
// UNIT1: pp::rt::Tensor [[XV1:v[0-9]+]] = pp::rt::gen::view([[CTX1]], 0, pp::rt::DType::F32, {4, 8});
// UNIT1-NEXT: pp::rt::Tensor [[X1:v[0-9]+]] = pp::rt::gen::stashTarget([[CTX1]], 0, [[MB1]], [[XV1]]);
// UNIT1: pp::rt::Tensor [[Y1:v[0-9]+]] = pp::rt::gen::view([[CTX1]], 256, pp::rt::DType::F32, {4, 8});
// UNIT1-NEXT: pp::rt::Status {{v[0-9]+}} = pp::rt::matmul({{.*}}, [[X1]], {{.*}}, [[Y1]]);
// UNIT1: pp::rt::gen::send([[CTX1]], 1, 0, [[MB1]], [[Y1]]);
// UNIT1-NEXT: pp::rt::gen::stash([[CTX1]], 0, [[MB1]], [[X1]]);
// UNIT1: void stage0_forward(pp::rt::StageContext& [[CTX2:v[0-9]+]], int64_t [[MB2:v[0-9]+]]) {
// UNIT1-NEXT: stage0_forward_part0([[CTX2]], [[MB2]]);
// UNIT1-NEXT: stage0_forward_part1([[CTX2]], [[MB2]]);
// UNIT1-NEXT: return;

// FUSED: #include "program.h"
// FUSED-NEXT: PP_FUSED_INLINE void stage1_forward_fused0(
// FUSED: void stage1_forward_part0(
// FUSED: pp::rt::fused::forEach<stage1_forward_fused0>(

// TABLE: #include "program.h"
// TABLE-NEXT: static pp::rt::ProgramInfo makeProgram() {
// TABLE: {.name = "stage0_forward", .function = &stage0_forward, .stage = 0,
// TABLE: int main(

// CMAKE: set(PP_SOURCES
// CMAKE-NEXT: program.cpp
// CMAKE-NEXT: program_1.cpp
// CMAKE: program_6.cpp)
// CMAKE: add_executable(train ${PP_SOURCES})
// CMAKE: file(CREATE_LINK ${CMAKE_CURRENT_SOURCE_DIR}/${file}

// WHOLE: 1 translation units, {{.*}}, 5 stage functions and parts (largest {{[0-9]+}} ops, budget 0)

// WHOLE-CPP: #include "program.h"
// WHOLE-CPP: PP_FUSED_INLINE void stage1_forward_fused0(
// WHOLE-CPP-NOT: _part
// WHOLE-CPP: void stage1_forward(
// WHOLE-CPP: int main(
