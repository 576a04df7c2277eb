; Lua tags. Specific patterns first: the first pattern to define a name wins.
; `function M.f()` and `function M:f()` are named by their last part.

(function_declaration
  name: (method_index_expression method: (identifier) @name)) @definition.method
(function_declaration
  name: (dot_index_expression field: (identifier) @name)) @definition.function
(function_declaration name: (identifier) @name) @definition.function

; `f = function () end`, `local f = function () end`, `M.f = function () end`
(assignment_statement
  (variable_list
    .
    name: [
      (identifier) @name
      (dot_index_expression field: (identifier) @name)
    ])
  (expression_list . value: (function_definition))) @definition.function
(field
  name: (identifier) @name
  value: (function_definition)) @definition.method

; Top-level locals (`local M = {}`).
(chunk
  (variable_declaration
    (assignment_statement
      (variable_list (identifier) @name)) @definition.variable))

; References: calls.
(function_call name: (identifier) @name) @reference.call
(function_call name: (dot_index_expression field: (identifier) @name)) @reference.call
(function_call name: (method_index_expression method: (identifier) @name)) @reference.call
