; Go tags. Specific patterns first: the first pattern to define a name wins.

(function_declaration name: (identifier) @name) @definition.function
(method_declaration name: (field_identifier) @name) @definition.method

(type_spec name: (type_identifier) @name type: (struct_type)) @definition.struct
(type_spec name: (type_identifier) @name type: (interface_type)) @definition.interface
(type_spec name: (type_identifier) @name) @definition.type
(type_alias name: (type_identifier) @name) @definition.type

(field_declaration name: (field_identifier) @name) @definition.field
(method_elem name: (field_identifier) @name) @definition.method

; Package-level constants and variables only (locals are not symbols).
; (`name:` would only match the first of `a, b = 1, 2`: a grammar quirk.)
(source_file
  (const_declaration (const_spec (identifier) @name) @definition.constant))
(source_file
  (var_declaration (var_spec (identifier) @name) @definition.variable))
(source_file
  (var_declaration
    (var_spec_list (var_spec (identifier) @name) @definition.variable)))

; References: calls and type uses (definitions' own names are filtered out).
(call_expression function: (identifier) @name) @reference.call
(call_expression
  function: (selector_expression field: (field_identifier) @name)) @reference.call
(type_identifier) @name @reference.type
