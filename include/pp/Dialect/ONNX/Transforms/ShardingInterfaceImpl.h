//===- ShardingInterfaceImpl.h - onnx ops under upstream shard --*- C++ -*-===//
//
// External models of upstream MLIR's ShardingInterface for the onnx ops that
// tensor parallelism splits: Gemm and MatMul (their reduction axis may be
// split: the partitioned op then sums its partial products with
// shard.all_reduce), and the elementwise ops with ONNX broadcasting (a
// dimension of size 1 broadcast against a larger one is not split). With
// them, upstream's --sharding-propagation and --shard-partition turn the
// annotations of --pp-tensor-parallel into per-device programs with the
// collectives they need.
//
//===----------------------------------------------------------------------===//

#ifndef PP_DIALECT_ONNX_TRANSFORMS_SHARDINGINTERFACEIMPL_H
#define PP_DIALECT_ONNX_TRANSFORMS_SHARDINGINTERFACEIMPL_H

namespace mlir {
class DialectRegistry;
} // namespace mlir

namespace pp::onnx {

/// Attaches the models to the onnx ops (and registers upstream func's, so
/// that func.return partitions) when the onnx dialect loads.
void registerShardingInterfaceExternalModels(mlir::DialectRegistry &registry);

} // namespace pp::onnx

#endif // PP_DIALECT_ONNX_TRANSFORMS_SHARDINGINTERFACEIMPL_H
