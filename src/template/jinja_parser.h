// Jinja parser: tokens -> syntax tree (jinja_ast.h), following Jinja2's
// grammar and operator precedence. Unknown tags, filters and tests are
// syntax errors here, as Jinja2 reports them when compiling. Nesting deeper
// than `max_depth` is an error rather than a stack overflow.
#pragma once

#include <string_view>

#include "template/jinja_ast.h"

namespace rf::jinja {

// Throws TemplateError(Kind::Syntax) with the line of the problem.
Body parse_template(std::string_view source, int max_depth);

}  // namespace rf::jinja
