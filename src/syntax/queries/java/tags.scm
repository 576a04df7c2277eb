; Java tags. Specific patterns first: the first pattern to define a name wins.

(class_declaration name: (identifier) @name) @definition.class
(interface_declaration name: (identifier) @name) @definition.interface
(enum_declaration name: (identifier) @name) @definition.enum
(record_declaration name: (identifier) @name) @definition.class
(annotation_type_declaration name: (identifier) @name) @definition.interface

(enum_constant name: (identifier) @name) @definition.enum_member
(record_declaration
  parameters: (formal_parameters
    (formal_parameter name: (identifier) @name) @definition.field))

(constructor_declaration name: (identifier) @name) @definition.constructor
(compact_constructor_declaration name: (identifier) @name) @definition.constructor
(method_declaration name: (identifier) @name) @definition.method
(annotation_type_element_declaration name: (identifier) @name) @definition.method

; Fields; UPPER_CASE ones become constants in code. No `declarator:` field
; so that `int a, b;` yields both names.
(field_declaration (variable_declarator name: (identifier) @name)) @definition.field
(constant_declaration (variable_declarator name: (identifier) @name)) @definition.constant

; References: calls, type uses (definitions' own names are filtered out),
; annotations.
(method_invocation name: (identifier) @name) @reference.call
(type_identifier) @name @reference.type
(marker_annotation name: (identifier) @name) @reference.annotation
(annotation name: (identifier) @name) @reference.annotation
