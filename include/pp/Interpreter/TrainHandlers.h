//===- TrainHandlers.h - Interpreter handlers of the train dialect -*- C++ -*-//
#ifndef PP_INTERPRETER_TRAINHANDLERS_H
#define PP_INTERPRETER_TRAINHANDLERS_H

namespace pp::interp {
class Interpreter;

/// Registers the handlers of the train dialect: backward ops, optimizer
/// steps and `train.global_write`.
void registerTrainHandlers(Interpreter &interp);
} // namespace pp::interp

#endif // PP_INTERPRETER_TRAINHANDLERS_H
