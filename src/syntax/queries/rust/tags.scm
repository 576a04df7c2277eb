; Rust tags. Specific patterns first: the first pattern to define a name wins.

; Methods: functions directly inside an impl or trait body.
(impl_item
  body: (declaration_list
    (function_item name: (identifier) @name) @definition.method))
(trait_item
  body: (declaration_list
    [
      (function_item name: (identifier) @name)
      (function_signature_item name: (identifier) @name)
    ] @definition.method))

; Containers.
(mod_item name: (identifier) @name) @definition.module
(struct_item name: (type_identifier) @name) @definition.struct
(union_item name: (type_identifier) @name) @definition.struct
(enum_item name: (type_identifier) @name) @definition.enum
(trait_item name: (type_identifier) @name) @definition.trait
; Named `impl Trait for Type` in code; the type is the selection.
(impl_item type: (_) @name) @definition.impl

; Members.
(enum_variant name: (identifier) @name) @definition.enum_member
(field_declaration name: (field_identifier) @name) @definition.field

; Items.
(function_item name: (identifier) @name) @definition.function
(function_signature_item name: (identifier) @name) @definition.function
(const_item name: (identifier) @name) @definition.constant
(static_item name: (identifier) @name) @definition.variable
(type_item name: (type_identifier) @name) @definition.type
(associated_type name: (type_identifier) @name) @definition.type
(macro_definition name: (identifier) @name) @definition.macro

; References: calls, macro invocations, type and path uses.
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (field_expression field: (field_identifier) @name)) @reference.call
(call_expression
  function: (scoped_identifier name: (identifier) @name)) @reference.call
(generic_function function: (identifier) @name) @reference.call
(generic_function
  function: (field_expression field: (field_identifier) @name)) @reference.call
(generic_function
  function: (scoped_identifier name: (identifier) @name)) @reference.call
(macro_invocation macro: (identifier) @name) @reference.macro
(macro_invocation macro: (scoped_identifier name: (identifier) @name)) @reference.macro
(type_identifier) @name @reference.type
(scoped_identifier path: (identifier) @name) @reference.path
(scoped_identifier name: (identifier) @name) @reference.path
(use_list (identifier) @name) @reference.use
(use_as_clause path: (identifier) @name) @reference.use
