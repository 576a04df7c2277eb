; TypeScript-only tags (also used for TSX). Loaded before the shared ecma
; tags, so these patterns win where both define a name.

(interface_declaration name: (type_identifier) @name) @definition.interface
(abstract_class_declaration name: (type_identifier) @name) @definition.class
(type_alias_declaration name: (type_identifier) @name) @definition.type
(enum_declaration name: (identifier) @name) @definition.enum
(enum_body name: (_) @name @definition.enum_member)
(enum_assignment name: (_) @name) @definition.enum_member
(internal_module name: (_) @name) @definition.namespace
(module name: (_) @name) @definition.module

; Members of interfaces and of object types given a name by `type`; not
; those of inline object types (parameters, `extends` arguments).
(interface_body
  [
    (method_signature name: (_) @name) @definition.method
    (property_signature name: (_) @name) @definition.property
  ])
(type_alias_declaration
  value: (object_type
    [
      (method_signature name: (_) @name) @definition.method
      (property_signature name: (_) @name) @definition.property
    ]))
(abstract_method_signature name: (_) @name) @definition.method
(public_field_definition name: (_) @name) @definition.property
(function_signature name: (identifier) @name) @definition.function

; References: every type name (definitions' own names are filtered out in
; code), and `extends` of classes.
(type_identifier) @name @reference.type
(extends_clause value: (identifier) @name) @reference.class
(extends_clause
  value: (member_expression property: (property_identifier) @name)) @reference.class
