//===- CudaLinkCheck.cpp - Link check of the CUDA kernel library ----------===//
//
// Built (never run by the tests: CI has no GPU) to prove at link time that
// pp_runtime_cuda defines every function of Kernels.h and CudaContext.h with
// the declared signature and that its CUDA libraries resolve. A signature
// that drifts from the header leaves an undefined reference here.
//
//===----------------------------------------------------------------------===//

#include "pp/Runtime/CudaContext.h"
#include "pp/Runtime/Kernels.h"

#include <cstdio>

namespace {

/// Takes the address of a function, forcing the linker to resolve it.
template <typename Fn> const void *addressOf(Fn *fn) {
  return reinterpret_cast<const void *>(fn);
}

} // namespace

int main(int argc, char **) {
  using namespace pp::rt;
  const void *functions[] = {addressOf(&dtypeSize),
                             addressOf(&dtypeName),
                             addressOf(&unary),
                             addressOf(&unaryGrad),
                             addressOf(&binary),
                             addressOf(&where),
                             addressOf(&clip),
                             addressOf(&cast),
                             addressOf(&expand),
                             addressOf(&reduceSumTo),
                             addressOf(&fill),
                             addressOf(&reduce),
                             addressOf(&softmax),
                             addressOf(&softmaxGrad),
                             addressOf(&layerNorm),
                             addressOf(&layerNormGrad),
                             addressOf(&batchNorm),
                             addressOf(&batchNormGrad),
                             addressOf(&matmul),
                             addressOf(&gemm),
                             addressOf(&conv),
                             addressOf(&convGradInput),
                             addressOf(&convGradWeight),
                             addressOf(&maxPool),
                             addressOf(&maxPoolGrad),
                             addressOf(&avgPool),
                             addressOf(&avgPoolGrad),
                             addressOf(&transpose),
                             addressOf(&slice),
                             addressOf(&sliceGrad),
                             addressOf(&pad),
                             addressOf(&padGrad),
                             addressOf(&concat),
                             addressOf(&split),
                             addressOf(&gather),
                             addressOf(&gatherGrad),
                             addressOf(&scatterND),
                             addressOf(&copy),
                             addressOf(&dropout),
                             addressOf(&dropoutGrad),
                             addressOf(&softmaxCrossEntropy),
                             addressOf(&softmaxCrossEntropyGrad),
                             addressOf(&sgdStep),
                             addressOf(&adamStep),
                             addressOf(&cuda::createContext),
                             addressOf(&cuda::destroyContext),
                             addressOf(&cuda::synchronize),
                             addressOf(&cuda::deviceAlloc),
                             addressOf(&cuda::deviceFree),
                             addressOf(&cuda::copyToDevice),
                             addressOf(&cuda::copyToHost)};
  Tensor t;
  t.shape = {2, 3};
  // Uses the table so that it is not optimised away.
  std::printf("%zu functions, numel %lld\n",
              sizeof(functions) / sizeof(functions[0]),
              static_cast<long long>(t.numel() + (functions[argc % 2] != 0)));
  return 0;
}
