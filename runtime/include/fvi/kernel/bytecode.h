#pragma once
// Statements the vectoriser cannot turn into whole-tensor operations (a recursion over time,
// nested loops filling a local, an `if` per element) as a register machine's program: the
// compiler (compiler/ir/statement_program.h) translates the block's statements into it, and the
// machine (machine.h) runs it on batched tensors, recording a tape it differentiates in reverse.
// One program, one machine: the interpreter and the generated C++ both run the same bytecode
// through the same machine, so they compute identical numbers.
//
// Registers hold an int, a real tensor (rows x cols, 1 or S draws: a tape node), or a container
// being filled element by element. Operand k of the program (a parameter, data, a transformed
// value) is preloaded in register operand_registers[k] before the first instruction.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fvi::kernel {

enum class Opcode : int32_t {
  IntConst,     // dst = int `number`
  RealConst,    // dst = real `value`
  ToInt,        // dst = int value of real scalar a (data: the same in every draw)
  ToReal,       // dst = int a as a real
  IntOp,        // dst = a (name) b on ints: + - * / % == != < <= > >= && || min max
  IntNot,       // dst = !a
  Index,        // dst = a[b, c]: b, c int registers, or -1 for every row (column); `number` bit 1: a
                // single row as a column; bit 2: general, args = the rows' and the columns' Pick
                // (kind, x, y) each: ranges and multi-indices
  IndexInt,     // dst = int element a[b, c] of data
  Slice,        // dst = rows (number 0) or columns (number 1) b..c of a
  Unary,        // dst = name(a), elementwise (ops_unary.h)
  Arith,        // dst = a (name) b: + - * / ^ elementwise with broadcasting, "matmul"
  Compare,      // dst = a (name) b as 1 or 0, elementwise; no derivative
  Lpdf,         // dst = sum of name's log densities at args (outcome first)
  Call,         // dst = name(args): log_sum_exp, sum, mean, dot_product, softmax, log_softmax, ...
  Rng,          // dst = a draw of name(args) per element and posterior draw (generated quantities)
  Build,        // dst = the column (number 0) or row (number 1) of the scalars args
  Declare,      // dst = an empty rows(a) x cols(b) container; elements read before written are NaN
  Move,         // dst = a
  Store,        // dst[b, c] = a: an element, or a row (c = -1) or column (b = -1); general as Index
  Target,       // the log density += sum(a)
  Output,       // output `number` = a
  Jump,         // go to instruction `number`
  JumpIfFalse,  // go to instruction `number` when a (an int, or a real the same in every draw) is 0
};

// How a general index picks rows (columns): every one; one, int register x; the range x..y (int
// registers); the ints of register x (a multi-index).
enum class Pick : int32_t { All = 0, One = 1, Range = 2, Many = 3 };
constexpr int64_t kAsColumn = 1, kGeneralIndex = 2;

inline const char* opcode_name(Opcode op) {
  switch (op) {
    case Opcode::IntConst: return "IntConst";
    case Opcode::RealConst: return "RealConst";
    case Opcode::ToInt: return "ToInt";
    case Opcode::ToReal: return "ToReal";
    case Opcode::IntOp: return "IntOp";
    case Opcode::IntNot: return "IntNot";
    case Opcode::Index: return "Index";
    case Opcode::IndexInt: return "IndexInt";
    case Opcode::Slice: return "Slice";
    case Opcode::Unary: return "Unary";
    case Opcode::Arith: return "Arith";
    case Opcode::Compare: return "Compare";
    case Opcode::Lpdf: return "Lpdf";
    case Opcode::Call: return "Call";
    case Opcode::Rng: return "Rng";
    case Opcode::Build: return "Build";
    case Opcode::Declare: return "Declare";
    case Opcode::Move: return "Move";
    case Opcode::Store: return "Store";
    case Opcode::Target: return "Target";
    case Opcode::Output: return "Output";
    case Opcode::Jump: return "Jump";
    case Opcode::JumpIfFalse: return "JumpIfFalse";
  }
  return "?";
}

struct Instruction {
  Opcode op;
  int32_t dst = -1, a = -1, b = -1, c = -1;
  int64_t number = 0;
  double value = 0;
  std::string name = {};
  std::vector<int32_t> args = {};
  int32_t line = 0;  // in the model's source, for run-time errors
};

struct Program {
  std::vector<Instruction> code;
  int32_t registers = 0;
  std::vector<int32_t> operand_registers;  // operand k's register
  int32_t outputs = 0;                     // Output numbers 0..outputs-1, packed in order
  bool log_density = false;                // the result is the sum of the Target terms (1 x 1)
};

// An instruction as generated code holds it: plain data, its args a range of one shared array.
// pk_oral's 782 instructions compile in 1.1 s as rows; as an initializer list of Instructions, each with a
// string and a vector, they took GCC 10 s.
struct InstructionRow {
  Opcode op;
  int32_t dst, a, b, c;
  int64_t number;
  double value;
  const char* name;
  int32_t first_arg, arg_count, line;
};

inline Program program_from_rows(const InstructionRow* rows, size_t count, const int32_t* args, int32_t registers,
                                 std::vector<int32_t> operand_registers, int32_t outputs, bool log_density) {
  Program p;
  p.code.reserve(count);
  for (size_t k = 0; k < count; ++k) {
    const InstructionRow& r = rows[k];
    p.code.push_back({r.op, r.dst, r.a, r.b, r.c, r.number, r.value, r.name,
                      std::vector<int32_t>(args + r.first_arg, args + r.first_arg + r.arg_count), r.line});
  }
  p.registers = registers;
  p.operand_registers = std::move(operand_registers);
  p.outputs = outputs;
  p.log_density = log_density;
  return p;
}

}  // namespace fvi::kernel
