; Tags shared by JavaScript, TypeScript and TSX (node types all three share).
; Specific patterns first: the first pattern to define a name wins.

; Functions assigned to variables (`const f = () => {}`), anywhere.
(variable_declarator
  name: (identifier) @name
  value: [(arrow_function) (function_expression) (generator_function)]) @definition.function

; Module-level and exported variables; the declarator is the item (one
; declaration can declare several names), the keyword is added to the detail.
(program
  (lexical_declaration
    kind: "const"
    (variable_declarator name: (identifier) @name) @definition.constant))
(program
  (lexical_declaration
    kind: "let"
    (variable_declarator name: (identifier) @name) @definition.variable))
(program
  (variable_declaration
    (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement
  declaration: (lexical_declaration
    kind: "const"
    (variable_declarator name: (identifier) @name) @definition.constant))
(export_statement
  declaration: (lexical_declaration
    kind: "let"
    (variable_declarator name: (identifier) @name) @definition.variable))
(export_statement
  declaration: (variable_declaration
    (variable_declarator name: (identifier) @name) @definition.variable))

(class_declaration name: (_) @name) @definition.class
(class name: (_) @name) @definition.class
(method_definition name: (_) @name) @definition.method
(function_declaration name: (identifier) @name) @definition.function
(generator_function_declaration name: (identifier) @name) @definition.function

; Functions stored in objects: `{ f: () => {} }`, `Foo.prototype.f = function () {}`.
(pair
  key: (property_identifier) @name
  value: [(arrow_function) (function_expression)]) @definition.method
(assignment_expression
  left: (member_expression property: (property_identifier) @name)
  right: [(arrow_function) (function_expression)]) @definition.function

; References: calls, constructions, imports and exports.
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (member_expression property: (property_identifier) @name)) @reference.call
(new_expression constructor: (identifier) @name) @reference.class
(new_expression
  constructor: (member_expression property: (property_identifier) @name)) @reference.class
(import_specifier name: (identifier) @name) @reference.import
(export_specifier name: (identifier) @name) @reference.export
