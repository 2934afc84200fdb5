#include "backend/llvm/chain_jit.h"

#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/DynamicLibrary.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>

#include <chrono>
#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>

#include "backend/llvm/chain_codegen.h"
#include "backend/llvm/runtime_calls.h"

namespace fvic::backend::llvm_jit {

using graph::Chain;

namespace {

std::string message(llvm::Error e) { return llvm::toString(std::move(e)); }

template <class T>
T unwrap(llvm::Expected<T> v, const char* what) {
  if (!v) throw std::runtime_error(std::string("the LLVM backend: ") + what + ": " + message(v.takeError()));
  return std::move(*v);
}

// Initialises LLVM's native target once; returns whether glibc's vector math (exp, log, sin, cos,
// pow on SIMD registers) is loaded, for the loop vectoriser to call (optimise()). Without it the
// loops call the scalar functions.
bool initialise_llvm() {
  static std::once_flag once;
  static bool vector_math = false;
  std::call_once(once, [] {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    vector_math = !llvm::sys::DynamicLibrary::LoadLibraryPermanently("libmvec.so.1");  // false: loaded
  });
  return vector_math;
}

// LLVM's O2 pipeline for the host's CPU, glibc's vector math declared when it is loaded.
void optimise(llvm::Module& module, llvm::TargetMachine& machine, bool vector_math) {
  llvm::TargetLibraryInfoImpl library(machine.getTargetTriple());
  if (vector_math) library.addVectorizableFunctionsFromVecLib(llvm::TargetLibraryInfoImpl::LIBMVEC_X86);
  llvm::LoopAnalysisManager loops;
  llvm::FunctionAnalysisManager functions;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager modules;
  llvm::PipelineTuningOptions tuning;
  tuning.LoopVectorization = true;
  tuning.SLPVectorization = true;
  llvm::PassBuilder builder(&machine, tuning);
  functions.registerPass([&] { return llvm::TargetLibraryAnalysis(library); });
  builder.registerModuleAnalyses(modules);
  builder.registerCGSCCAnalyses(cgscc);
  builder.registerFunctionAnalyses(functions);
  builder.registerLoopAnalyses(loops);
  builder.crossRegisterProxies(loops, functions, cgscc, modules);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O2).run(module, modules);
}

}  // namespace

std::shared_ptr<void> LlvmChainCompiler::compile(std::vector<graph::FactorPlan>& plans) const {
  const auto start = std::chrono::steady_clock::now();
  statistics_ = {};
  const bool vector_math = initialise_llvm();
  const std::vector<Chain*> chains = graph::all_chains(plans);
  if (chains.empty()) return nullptr;

  llvm::orc::JITTargetMachineBuilder target = unwrap(llvm::orc::JITTargetMachineBuilder::detectHost(), "the host");
  target.setCodeGenOptLevel(llvm::CodeGenOpt::Aggressive);
  std::unique_ptr<llvm::TargetMachine> machine = unwrap(target.createTargetMachine(), "the target machine");

  auto context = std::make_unique<llvm::LLVMContext>();
  auto module = std::make_unique<llvm::Module>("chains", *context);
  module->setDataLayout(machine->createDataLayout());
  module->setTargetTriple(machine->getTargetTriple().str());
  for (size_t i = 0; i < chains.size(); ++i) {
    const EmitCounts counts = emit_chain(*module, *chains[i], true, "chain" + std::to_string(i) + "_d");
    emit_chain(*module, *chains[i], false, "chain" + std::to_string(i) + "_f");
    statistics_.inline_members += counts.inline_members;
    statistics_.runtime_members += counts.runtime_members;
  }
  std::string problems;
  llvm::raw_string_ostream problem_stream(problems);
  if (llvm::verifyModule(*module, &problem_stream))
    throw std::logic_error("the LLVM backend generated an invalid module: " + problem_stream.str());
  optimise(*module, *machine, vector_math);

  std::unique_ptr<llvm::orc::LLJIT> jit =
      unwrap(llvm::orc::LLJITBuilder().setJITTargetMachineBuilder(std::move(target)).create(), "the JIT");
  llvm::orc::JITDylib& library = jit->getMainJITDylib();
  const char prefix = jit->getDataLayout().getGlobalPrefix();
  library.addGenerator(unwrap(llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(prefix), "libm"));
  llvm::orc::SymbolMap runtime;
  for (const RuntimeCall& call : runtime_calls())
    runtime[jit->mangleAndIntern(call.name)] =
        llvm::JITEvaluatedSymbol(llvm::pointerToJITTargetAddress(call.address), llvm::JITSymbolFlags::Exported);
  if (llvm::Error e = library.define(llvm::orc::absoluteSymbols(std::move(runtime))))
    throw std::runtime_error("the LLVM backend: " + message(std::move(e)));
  if (llvm::Error e = jit->addIRModule(llvm::orc::ThreadSafeModule(std::move(module), std::move(context))))
    throw std::runtime_error("the LLVM backend: " + message(std::move(e)));
  // Every chain's code found before any is set: a failure leaves the plans as they were.
  std::vector<std::pair<Chain::BlockDouble, Chain::BlockFloat>> code;
  for (size_t i = 0; i < chains.size(); ++i) {
    const std::string name = "chain" + std::to_string(i);
    code.emplace_back(unwrap(jit->lookup(name + "_d"), "a chain").toPtr<Chain::BlockDouble>(),
                      unwrap(jit->lookup(name + "_f"), "a chain").toPtr<Chain::BlockFloat>());
  }
  for (size_t i = 0; i < chains.size(); ++i) std::tie(chains[i]->code_double, chains[i]->code_float) = code[i];
  statistics_.chains = int(chains.size());
  statistics_.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return std::shared_ptr<llvm::orc::LLJIT>(std::move(jit));
}

}  // namespace fvic::backend::llvm_jit
