// The .fvi modelling language (DESIGN.md §2): Stan's types, constraints, expressions and
// statements, plus ownership — `server data`, `silo data`, `split data` blocks, the marks
// `global` / `local` / `split`, `silo_sum(...)`, and an `inference { key = value; }` block.
//
// The grammar accepts blocks in any order and any number of times; the AST builder reports
// order and duplicates with a message that says what to do, which a grammar error could not.
// Contextual words (`lower`, `upper`, inference keys and values) are plain identifiers.
grammar FVI;

program : block* EOF ;

block
  : FUNCTIONS '{' functionDef* '}'                          # functionsBlock
  | DATA '{' varDecl* '}'                                    # dataBlock
  | SERVER DATA '{' varDecl* '}'                             # serverDataBlock
  | SILO DATA '{' varDecl* '}'                               # siloDataBlock
  | SPLIT DATA '{' varDecl* '}'                              # splitDataBlock
  | HYPERPARAMETERS '{' varDecl* '}'                         # hyperparametersBlock
  | PARAMETERS '{' varDecl* '}'                              # parametersBlock
  | MODEL '{' statement* '}'                                 # modelBlock
  // `transformed data`, `transformed parameters`, `generated quantities`: two words, neither
  // reserved (Stan programs name variables `quantities`); the AST builder checks the words.
  | first=IDENT second=(DATA | PARAMETERS | IDENT) '{' statement* '}'  # derivedBlock
  | INFERENCE '{' setting* '}'                               # inferenceBlock
  ;

// ---- declarations ---------------------------------------------------------------------------

varDecl : mark? type IDENT ('=' expr)? ';' ;

mark : GLOBAL | LOCAL | SPLIT ;

type : (ARRAY '[' expr (',' expr)* ']')? baseType ;

baseType
  : INT bounds?                                              # intType
  | REAL bounds?                                             # realType
  | VECTOR bounds? '[' expr ']'                              # vectorType
  | ROW_VECTOR bounds? '[' expr ']'                          # rowVectorType
  | MATRIX bounds? '[' expr ',' expr ']'                     # matrixType
  | SIMPLEX '[' expr ']'                                     # simplexType
  | ORDERED '[' expr ']'                                     # orderedType
  | POSITIVE_ORDERED '[' expr ']'                            # positiveOrderedType
  | CHOLESKY_FACTOR_CORR '[' expr ']'                        # choleskyCorrType
  | CHOLESKY_FACTOR_COV '[' expr (',' expr)? ']'             # choleskyCovType
  | CORR_MATRIX '[' expr ']'                                 # corrMatrixType
  | COV_MATRIX '[' expr ']'                                  # covMatrixType
  | UNIT_VECTOR '[' expr ']'                                 # unitVectorType
  ;

// `<lower=a, upper=b>`: the bound is an arithmetic expression, so `>` closes the list.
bounds : '<' bound (',' bound)* '>' ;
bound : IDENT '=' arith ;

// ---- user functions (inlined at each call: frontend/functions.h) -----------------------------

functionDef : returnType IDENT '(' (funArg (',' funArg)*)? ')' statement ;
returnType : VOID | unsizedType ;
funArg : DATA? unsizedType IDENT ;
unsizedType : (ARRAY '[' ','* ']')? (INT | REAL | VECTOR | ROW_VECTOR | MATRIX) ;

// ---- statements -----------------------------------------------------------------------------

statement
  : expr '~' IDENT '(' (expr (',' expr)*)? ')' ';'          # tildeStmt
  | TARGET '+=' expr ';'                                     # targetStmt
  | expr op=('=' | '+=' | '-=' | '*=' | '/=') expr ';'       # assignStmt
  | FOR '(' IDENT IN expr ':' expr ')' statement              # forStmt
  | IF '(' expr ')' statement (ELSE statement)?              # ifStmt
  | '{' statement* '}'                                       # blockStmt
  | varDecl                                                  # declStmt
  | RETURN expr? ';'                                         # returnStmt
  | ';'                                                      # emptyStmt
  ;

// ---- expressions (Stan's table) ---------------------------------------------------------------

// ANTLR gives earlier alternatives higher precedence: comparisons bind tightest, then equality,
// `&&`, `||`, and `? :` loosest (`a > 0 && b > 0` is `(a > 0) && (b > 0)`).
expr
  : expr op=('<' | '<=' | '>' | '>=') expr                   # cmpExpr
  | expr op=('==' | '!=') expr                               # eqExpr
  | expr '&&' expr                                           # andExpr
  | expr '||' expr                                           # orExpr
  | <assoc=right> expr '?' expr ':' expr                    # condExpr
  | arith                                                    # arithExpr
  ;

// ANTLR gives earlier alternatives higher precedence: postfix, then `^` (right-associative and
// tighter than unary minus, so -a^b is -(a^b)), then prefix, then `*`, then `+`.
arith
  : arith '\''                                               # transposeExpr
  | arith '[' index (',' index)* ']'                         # indexExpr
  | <assoc=right> arith op=('^' | '.^') arith                # powExpr
  | op=('!' | '-' | '+') arith                               # unaryExpr
  | arith op=('*' | '/' | '%' | '.*' | './' | '\\') arith    # mulExpr
  | arith op=('+' | '-') arith                               # addExpr
  | primary                                                  # primaryExpr
  ;

// An index is a single position, an int array (multi-index), or a range a:b, a:, :b, :.
index
  : lo=expr? ':' hi=expr?                                    # rangeIndex
  | expr                                                     # singleIndex
  |                                                          # allIndex
  ;

primary
  : IDENT '(' expr '|' (expr (',' expr)*)? ')'               # condCall
  | IDENT '(' (expr (',' expr)*)? ')'                        # call
  | IDENT                                                    # variable
  | INT_LIT                                                  # intLiteral
  | REAL_LIT                                                 # realLiteral
  | '(' expr ')'                                             # parens
  | '{' expr (',' expr)* '}'                                 # arrayLiteral
  | '[' expr (',' expr)* ']'                                 # rowVectorLiteral
  ;

// ---- inference settings ---------------------------------------------------------------------

setting : IDENT '=' settingValue ';' ;

settingValue
  : IDENT ('(' settingValue (',' settingValue)* ')')?         # namedValue
  | '-'? (INT_LIT | REAL_LIT)                                 # numberValue
  | STRING                                                    # stringValue
  ;

// ---- tokens ---------------------------------------------------------------------------------

FUNCTIONS : 'functions' ;
DATA : 'data' ;
SERVER : 'server' ;
SILO : 'silo' ;
SPLIT : 'split' ;
HYPERPARAMETERS : 'hyperparameters' ;
PARAMETERS : 'parameters' ;
MODEL : 'model' ;
INFERENCE : 'inference' ;
GLOBAL : 'global' ;
LOCAL : 'local' ;
ARRAY : 'array' ;
INT : 'int' ;
REAL : 'real' ;
VECTOR : 'vector' ;
ROW_VECTOR : 'row_vector' ;
MATRIX : 'matrix' ;
SIMPLEX : 'simplex' ;
ORDERED : 'ordered' ;
POSITIVE_ORDERED : 'positive_ordered' ;
CHOLESKY_FACTOR_CORR : 'cholesky_factor_corr' ;
CHOLESKY_FACTOR_COV : 'cholesky_factor_cov' ;
CORR_MATRIX : 'corr_matrix' ;
COV_MATRIX : 'cov_matrix' ;
UNIT_VECTOR : 'unit_vector' ;
VOID : 'void' ;
TARGET : 'target' ;
FOR : 'for' ;
IN : 'in' ;
IF : 'if' ;
ELSE : 'else' ;
RETURN : 'return' ;

IDENT : [a-zA-Z] [a-zA-Z0-9_]* ;
REAL_LIT
  : [0-9]+ '.' [0-9]* EXPONENT?
  | '.' [0-9]+ EXPONENT?
  | [0-9]+ EXPONENT
  ;
INT_LIT : [0-9]+ ;
fragment EXPONENT : [eE] [+-]? [0-9]+ ;
STRING : '"' ~["\r\n]* '"' ;

LINE_COMMENT : '//' ~[\r\n]* -> skip ;
BLOCK_COMMENT : '/*' .*? '*/' -> skip ;
WS : [ \t\r\n]+ -> skip ;

// Anything else becomes a token the parser cannot use, so the error names the character.
UNEXPECTED_CHAR : . ;
