; Python tags. Specific patterns first: the first pattern to define a name wins.

; Methods: functions directly in a class body, decorated or not.
(class_definition
  body: (block
    [
      (function_definition name: (identifier) @name) @definition.method
      (decorated_definition
        definition: (function_definition name: (identifier) @name) @definition.method)
    ]))

; Class attributes (`x = 1` / `x: int = 1` in a class body).
(class_definition
  body: (block
    (expression_statement
      (assignment left: (identifier) @name) @definition.field)))

; Module-level assignments; UPPER_CASE ones become constants in code.
(module
  (expression_statement
    (assignment left: (identifier) @name) @definition.variable))

(class_definition name: (identifier) @name) @definition.class
(function_definition name: (identifier) @name) @definition.function
(type_alias_statement left: (type (identifier) @name)) @definition.type

; References: calls, decorators, base classes, annotations, imports.
(call function: (identifier) @name) @reference.call
(call function: (attribute attribute: (identifier) @name)) @reference.call
(decorator (identifier) @name) @reference.call
(decorator (attribute attribute: (identifier) @name)) @reference.call
(class_definition
  superclasses: (argument_list
    [
      (identifier) @name
      (attribute attribute: (identifier) @name)
    ])) @reference.class
(type (identifier) @name) @reference.type
(generic_type (identifier) @name) @reference.type
(type (subscript value: (identifier) @name)) @reference.type
(import_from_statement
  name: (dotted_name (identifier) @name .)) @reference.import
(import_from_statement
  name: (aliased_import name: (dotted_name (identifier) @name .))) @reference.import
