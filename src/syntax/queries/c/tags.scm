; C tags; also loaded for C++ (after the C++-only file, whose patterns win).
; Specific patterns first: the first pattern to define a name wins.

; Function definitions, returning values or (nested) pointers.
(function_definition
  declarator: (function_declarator declarator: (identifier) @name)) @definition.function
(function_definition
  declarator: (pointer_declarator
    declarator: (function_declarator declarator: (identifier) @name))) @definition.function
(function_definition
  declarator: (pointer_declarator
    declarator: (pointer_declarator
      declarator: (function_declarator declarator: (identifier) @name)))) @definition.function

; Types with bodies (a bare `struct foo;` or `struct foo x;` is a use).
(struct_specifier name: (type_identifier) @name body: (_)) @definition.struct
(union_specifier name: (type_identifier) @name body: (_)) @definition.struct
(enum_specifier name: (type_identifier) @name body: (_)) @definition.enum
(enumerator name: (identifier) @name) @definition.enum_member

; Fields (possibly pointers or arrays). No `declarator:` field in the first
; pattern so that `int a, b;` yields both names.
(field_declaration (field_identifier) @name) @definition.field
(field_declaration
  declarator: (pointer_declarator declarator: (field_identifier) @name)) @definition.field
(field_declaration
  declarator: (array_declarator declarator: (field_identifier) @name)) @definition.field

(type_definition declarator: (type_identifier) @name) @definition.type
(type_definition
  declarator: (pointer_declarator declarator: (type_identifier) @name)) @definition.type

(preproc_def name: (identifier) @name) @definition.macro
(preproc_function_def name: (identifier) @name) @definition.macro

; File-level variables.
(translation_unit
  (declaration declarator: (init_declarator declarator: (identifier) @name)) @definition.variable)
(translation_unit
  (declaration
    declarator: (init_declarator
      declarator: (pointer_declarator declarator: (identifier) @name))) @definition.variable)
(translation_unit
  (declaration declarator: (identifier) @name) @definition.variable)

; References: calls and type uses (definitions' own names are filtered out).
(call_expression function: (identifier) @name) @reference.call
(call_expression function: (field_expression field: (field_identifier) @name)) @reference.call
(type_identifier) @name @reference.type
