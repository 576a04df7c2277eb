; JSX component uses (JavaScript and TSX). Lowercase tags are HTML elements,
; not references; the predicate only runs on JSX element names.

((jsx_opening_element name: (identifier) @name) @reference.component
  (#match? @name "^[A-Z]"))
((jsx_self_closing_element name: (identifier) @name) @reference.component
  (#match? @name "^[A-Z]"))
(jsx_opening_element
  name: (member_expression property: (property_identifier) @name)) @reference.component
(jsx_self_closing_element
  name: (member_expression property: (property_identifier) @name)) @reference.component
