; JavaScript-only tags (TypeScript names these nodes differently).

(field_definition property: (_) @name) @definition.property

(class_heritage (identifier) @name) @reference.class
(class_heritage (member_expression property: (property_identifier) @name)) @reference.class
