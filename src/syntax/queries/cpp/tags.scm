; C++-only tags, loaded before the C tags (whose patterns also apply).
; Specific patterns first: the first pattern to define a name wins.

; Constructors: functions without a return type, in a class or out of line.
(field_declaration_list
  (function_definition
    !type
    declarator: (function_declarator declarator: (identifier) @name)) @definition.constructor)
(field_declaration_list
  (declaration
    !type
    declarator: (function_declarator declarator: (identifier) @name)) @definition.constructor)
(function_definition
  !type
  declarator: (function_declarator
    declarator: [
      (qualified_identifier name: (identifier) @name)
      (qualified_identifier name: (qualified_identifier name: (identifier) @name))
    ])) @definition.constructor

; Methods defined or declared in a class body.
(field_declaration_list
  (function_definition
    declarator: [
      (function_declarator declarator: (_) @name)
      (pointer_declarator declarator: (function_declarator declarator: (_) @name))
      (reference_declarator (function_declarator declarator: (_) @name))
    ]) @definition.method)
(field_declaration_list
  (template_declaration
    (function_definition
      declarator: (function_declarator declarator: (_) @name)) @definition.method))
(field_declaration
  declarator: [
    (function_declarator declarator: (_) @name)
    (pointer_declarator declarator: (function_declarator declarator: (_) @name))
    (reference_declarator (function_declarator declarator: (_) @name))
  ]) @definition.method

; Out-of-line member definitions: `void Foo::bar() {}`, `ns::Foo::bar`.
(function_definition
  declarator: [
    (function_declarator
      declarator: (qualified_identifier name: [(identifier) (destructor_name) (operator_name)] @name))
    (function_declarator
      declarator: (qualified_identifier
        name: (qualified_identifier name: [(identifier) (destructor_name) (operator_name)] @name)))
    (pointer_declarator
      declarator: (function_declarator
        declarator: (qualified_identifier name: [(identifier) (operator_name)] @name)))
    (reference_declarator
      (function_declarator
        declarator: (qualified_identifier name: [(identifier) (operator_name)] @name)))
  ]) @definition.method

; Free functions returning references, and operators.
(function_definition
  declarator: (reference_declarator
    (function_declarator declarator: (identifier) @name))) @definition.function
(function_definition
  declarator: (function_declarator declarator: (operator_name) @name)) @definition.function

(namespace_definition name: (_) @name) @definition.namespace
(class_specifier name: (_) @name body: (_)) @definition.class
(alias_declaration name: (type_identifier) @name) @definition.type

; Namespace-level variables.
(namespace_definition
  body: (declaration_list
    (declaration declarator: (init_declarator declarator: (identifier) @name)) @definition.variable))

; References: qualified and template calls, `new`, base classes.
(call_expression function: (qualified_identifier name: (identifier) @name)) @reference.call
(call_expression function: (template_function name: (identifier) @name)) @reference.call
(call_expression
  function: (qualified_identifier name: (template_function name: (identifier) @name))) @reference.call
(call_expression
  function: (field_expression field: (template_method name: (field_identifier) @name))) @reference.call
