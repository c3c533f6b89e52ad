// Jinja statements: if, for (loop variables, filters, else, break/continue), set, namespace, macros, filter/with blocks, raw, whitespace control.
// Each case: a template, its context (JSON) and the exact output Python
// Jinja2 3.1.6 gives when configured as transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, transformers' tojson,
// strftime_now fixed at 2026-01-15); a null output means Jinja2 fails.
#include "unit/template_cases.h"

namespace {

using Case = rf::test::JinjaCase;  // source, context, expected (null: must fail)

const Case kCases[] = {
    {R"J(a
  {% raw %}
  x {{ y }}
  {% endraw %}
b)J", R"J({})J", R"J(a

  x {{ y }}
b)J"},
    {R"J(  {% if true %}x{% endif %}
  {{ 1 }}
)J", R"J({})J", R"J(x  1)J"},
    {R"J({% for i in [1,2] %}
  {{ i }}
{% endfor %}
)J", R"J({})J", R"J(  1
  2
)J"},
    {R"J(x {%- if true -%}   y   {%- endif -%} z)J", R"J({})J", R"J(xyz)J"},
    {R"J({% set x %}
  hi {{ 1 }}
{% endset %}[{{ x }}])J", R"J({})J", R"J([  hi 1
])J"},
    {R"J({% for x in xs %}{{ loop.index }}{{ loop.previtem }}{{ loop.nextitem }}{% if loop.last %}L{% endif %}{% else %}E{% endfor %})J", R"J({"xs": [1, 2, 3]})J", R"J(1221332L)J"},
    {R"J({% for x in xs if x > 1 %}{{ loop.index }}/{{ loop.length }} {% else %}E{% endfor %})J", R"J({"xs": [1, 2, 3]})J", R"J(1/2 2/2 )J"},
    {R"J({% for x in xs if x > 5 %}{{ x }}{% else %}E{% endfor %})J", R"J({"xs": [1, 2, 3]})J", R"J(E)J"},
    {R"J({% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %})J", R"J({"d": {"b": 1, "a": 2}})J", R"J(b=1;a=2;ba)J"},
    {R"J({% set ns = namespace(x=1, y=[]) %}{% for i in range(3) %}{% set ns.x = ns.x + i %}{% endfor %}{{ ns.x }}{{ ns }})J", R"J({})J", R"J(4<Namespace {'x': 4, 'y': []}>)J"},
    {R"J({% macro m(a, b='x') %}[{{ a }}{{ b }}{{ varargs }}{{ kwargs }}]{% endmacro %}{{ m(1) }}{{ m(1, 2, 3) }}{{ m(1, c=4) }}{{ m(b=5, a=6) }})J", R"J({})J", R"J([1x(){}][12(3,){}][1x(){'c': 4}][65(){}])J"},
    {R"J({% for i in range(3) %}{% if i == 1 %}{% continue %}{% endif %}{{ i }}{% if i == 2 %}{% break %}{% endif %}{% endfor %})J", R"J({})J", R"J(02)J"},
    {R"J({% if %})J", R"J({})J", nullptr},
    {R"J(a
{% if x %}
b
{% endfor %})J", R"J({})J", nullptr},
    {R"J({% for m in messages %}{{ m.role }}:{% if m.content is string %}{{ m.content }}{% elif m.content is none %}NONE{% else %}{% for p in m.content %}[{{ p.type }}{{ p.text if p.text is defined }}]{% endfor %}{% endif %};{% endfor %})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(system:Sys;user:[textHi][image];assistant:NONE;tool:{"t": 20};)J"},
    {R"J({% for m in messages if m.tool_calls %}{% for tc in m.tool_calls %}{{ tc.function.name }}({{ tc.function.arguments|tojson }}){{ tc.function.arguments.items()|list }}{% endfor %}{% endfor %})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(get_weather({"city": "Paris", "n": 3})[('city', 'Paris'), ('n', 3)])J"},
    {R"J({% set x = messages[0] %}{% set x.role = 'q' %})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", nullptr},
    {R"J({% set ns = namespace(found=false, items=[]) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.found = true %}{% set ns.items = ns.items + [loop.index] %}{% endif %}{% endfor %}{{ ns.found }}{{ ns.items }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(True[2])J"},
    {R"J({%- for m in messages -%}
  {%- if loop.first -%}F{%- endif -%}
  {{- loop.revindex -}}{{- loop.revindex0 -}}
  {%- if not loop.last %},{% endif -%}
{%- endfor -%})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(F43,32,21,10)J"},
    {R"J({% for a, b in [(1, 2), [3, 4]] %}{{ a }}{{ b }}{% endfor %}{% for a, b in {'x': 1}.items() %}{{ a }}{{ b }}{% endfor %})J", R"J({})J", R"J(1234x1)J"},
    {R"J({% for a, b in [(1, 2, 3)] %}{% endfor %})J", R"J({})J", nullptr},
    {R"J({% for x in 5 %}{% endfor %})J", R"J({})J", nullptr},
    {R"J({% for c in 'héllo' %}{{ c }}.{% endfor %})J", R"J({})J", R"J(h.é.l.l.o.)J"},
    {R"J({% for x in [] %}a{% else %}b{% endfor %}{% for x in none_var %}a{% else %}u{% endfor %})J", R"J({})J", R"J(bu)J"},
    {R"J({% for i in range(3) %}{{ loop.cycle('a', 'b') }}{% endfor %})J", R"J({})J", R"J(aba)J"},
    {R"J({% for i in range(2) %}{% for j in range(2) %}{{ loop.index }}{{ i }}{% endfor %}{{ loop.index }}|{% endfor %})J", R"J({})J", R"J(10201|11212|)J"},
    {R"J({% macro greet(name, greeting='Hello') -%}
{{ greeting }}, {{ name }}!
{%- endmacro %}{{ greet('A') }} {{ greet('B', greeting='Hi') }} {{ greet(name='C') }})J", R"J({})J", R"J(Hello, A! Hi, B! Hello, C!)J"},
    {R"J({% macro rec(n) %}{% if n > 0 %}{{ n }}{{ rec(n - 1) }}{% endif %}{% endmacro %}{{ rec(5) }})J", R"J({})J", R"J(54321)J"},
    {R"J({% macro m() %}{{ caller_var }}{% endmacro %}{% set caller_var = 'late' %}{{ m() }})J", R"J({})J", R"J(late)J"},
    {R"J({% macro m(x) %}{{ x|upper }}{% endmacro %}{{ m('a') ~ m('b') }}{{ m('c').strip() }}{{ (m('d') + 'e')|length }})J", R"J({})J", R"J(ABC2)J"},
    {R"J({% set a, b = 1, 2 %}{{ a }}{{ b }}{% set t = 1, 2 %}{{ t }})J", R"J({})J", R"J(12(1, 2))J"},
    {R"J({% set s %}{{ 'x' }} y {% endset %}[{{ s }}]{% set u | upper %}abc{% endset %}{{ u }})J", R"J({})J", R"J([x y ]ABC)J"},
    {R"J({% filter upper %}hello {{ 'w' }}{% endfilter %})J", R"J({})J", R"J(HELLO W)J"},
    {R"J({% with a = 1, b = 2 %}{{ a + b }}{% endwith %}{{ a }})J", R"J({})J", R"J(3)J"},
    {R"J({% set l = [3, 1, 2] %}{{ l|sort }}{{ l|sort(reverse=true) }}{{ l|max }}{{ l|min }}{{ l|sum }}{{ l|first }}{{ l|last }}{{ l|reverse|list }}{{ l|list }}{{ l|unique|list }})J", R"J({})J", R"J([1, 2, 3][3, 2, 1]31632[2, 1, 3][3, 1, 2][3, 1, 2])J"},
    {R"J({% if messages[0].role == 'system' %}{{ raise_exception('no system') }}{% endif %}ok)J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", nullptr},
    {R"J({% for i in range(100000) %}{% endfor %}done)J", R"J({})J", R"J(done)J"},
    {R"J({%- set x = 'a' -%}
  {{- x -}}
)J", R"J({})J", R"J(a)J"},
    {R"J({% raw %}{{ not parsed }}{% endraw %})J", R"J({})J", R"J({{ not parsed }})J"},
    {R"J({% if true %}a{% elif true %}b{% else %}c{% endif %}{% if false %}a{% elif true %}b{% endif %}{% if false %}a{% elif false %}b{% else %}c{% endif %})J", R"J({})J", R"J(abc)J"},
    {R"J({% if x is defined %}{% set y = 1 %}{% endif %}{{ y }})J", R"J({"x": 1})J", R"J(1)J"},
    {R"J({% for i in [1] %}{% set y = 5 %}{% endfor %}{{ y }})J", R"J({})J", R"J()J"},
    {R"J({% set y = 1 %}{% for i in [1] %}{% set y = y + 1 %}{{ y }}{% endfor %}{{ y }})J", R"J({})J", R"J(21)J"},
    {R"J({% for i in range(5) %}{% if i is even %}{% continue %}{% endif %}{{ i }}{% if i > 2 %}{% break %}{% endif %}{% endfor %})J", R"J({})J", R"J(13)J"},
    {R"J({% for i in range(3) %}{{ loop.previtem }}-{{ loop.nextitem }}|{% endfor %}{% for i in range(2) %}{{ loop.length }}{{ loop.depth }}{{ loop.depth0 }}{% endfor %})J", R"J({})J", R"J(-1|0-2|1-|210210)J"},
    {R"J({% for x in xs %}{{ x }}{% endfor %}{% break %})J", R"J({"xs": [1]})J", nullptr},
    {R"J({% if true %}no end)J", R"J({})J", nullptr},
    {R"J({% for x %}{% endfor %})J", R"J({})J", nullptr},
    {R"J({% set %})J", R"J({})J", nullptr},
    {R"J({% macro %}{% endmacro %})J", R"J({})J", nullptr},
    {R"J({% for m in x %}{% endfor %}ok{{ x|length }})J", R"J({})J", R"J(ok0)J"},
    {R"J({% set x = 1 %}{% set x = x + 1 %}{{ x }}{% set l = [1] %}{% set l2 = l %}{{ l2 is sameas l }})J", R"J({})J", R"J(2True)J"},
    {R"J({% if 1 %}{% if 0 %}x{% elif 1 %}{% for i in [1] %}{% if loop.first %}deep{% endif %}{% endfor %}{% endif %}{% endif %})J", R"J({})J", R"J(deep)J"},
    {R"J({%- macro tool_desc(t) -%}
  - {{ t.name }}: {{ t.description|default('n/a') }}
{%- endmacro -%}
{% for t in tools %}
{{ tool_desc(t) }}
{% endfor %})J", R"J({"tools": [{"name": "a", "description": "A"}, {"name": "b"}]})J", R"J(- a: A
- b: n/a
)J"},
    {R"J({% macro m(a, b) %}{{ a }}|{{ b }}|{{ b is defined }}{% endmacro %}{{ m(1) }})J", R"J({})J", R"J(1||False)J"},
    {R"J({% macro m(a) %}{{ a }}{% endmacro %}{{ m(1, 2) }})J", R"J({})J", nullptr},
    {R"J({% macro m(a) %}{{ a }}{{ kwargs }}{% endmacro %}{{ m(1, z=2) }})J", R"J({})J", R"J(1{'z': 2})J"},
    {R"J({% macro m(a, b=a) %}{{ b }}{% endmacro %}{{ m(3) }})J", R"J({})J", R"J(3)J"},
    {R"J({% macro outer() %}{% macro inner() %}in{% endmacro %}{{ inner() }}!{% endmacro %}{{ outer() }})J", R"J({})J", R"J(in!)J"},
    {R"J({% for x in [1,2] %}{% macro m() %}{{ x }}{% endmacro %}{{ m() }}{% endfor %})J", R"J({})J", R"J(12)J"},
    {R"J({% set ns = namespace(a=[]) %}{% for i in range(3) %}{% set ns.a = ns.a + [i * 2] %}{% endfor %}{{ ns.a }}{{ ns.a|length }}{{ ns.missing }}|{{ ns.missing is defined }})J", R"J({})J", R"J([0, 2, 4]3|False)J"},
    {R"J({% set ns = namespace() %}{% set ns.x = 1 %}{{ ns.x }}{{ ns['x'] }})J", R"J({})J", R"J(11)J"},
    {R"J({% set d = {'a': 1} %}{% set d.a = 2 %})J", R"J({})J", nullptr},
    {R"J({% set x = 1 %}{% set x.a = 2 %})J", R"J({})J", nullptr},
    {R"J({% for i in range(3) -%}
{{ i }}
{%- endfor %})J", R"J({})J", R"J(012)J"},
    {R"J({% if true %}
    line
{% endif %}
)J", R"J({})J", R"J(    line
)J"},
    {R"J(<s>{% for m in messages %}
  {% if m.role == 'user' %}
    [INST] {{ m.content }} [/INST]
  {% else %}
    {{ m.content }}</s>
  {% endif %}
{% endfor %})J", R"J({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]})J", R"J(<s>    [INST] a [/INST]
    b</s>
)J"},
    {R"J({% if true %}a{% endif %}

b)J", R"J({})J", R"J(a
b)J"},
    {R"J(  {% raw -%}  x  {%- endraw %}  )J", R"J({})J", R"J(x  )J"},
    {R"J({% for i in [1] %}{{ loop.index0 }}{{ loop['index'] }}{{ loop.nonexistent is defined }}{% endfor %})J", R"J({})J", R"J(01False)J"},
    {R"J({% if [1]|select('odd') %}a{% endif %}{% if []|select %}b{% endif %}{% if []|map('string') %}c{% endif %}{% if {}.items() %}d{% endif %}{% if {'a':1}.keys() %}e{% endif %})J", R"J({})J", R"J(abce)J"},
    {R"J({% set g = [1, 2, 3]|select('odd') %}{{ g|list }}{{ g|list }})J", R"J({})J", R"J([1, 3][])J"},
    {R"J({{ [3, 1]|reverse|list }}{% if []|reverse %}r{% endif %})J", R"J({})J", R"J([1, 3]r)J"},
    {R"J({% for k, v in {'a': 1}.items() %}{{ k }}{{ v }}{% endfor %}{{ 'a' in {'a': 1}.keys() }})J", R"J({})J", R"J(a1True)J"},
    {R"J({% for x in [1, 2] %}{% break %}{% else %}else-after-break{% endfor %}|{% for x in [1, 2] %}{% if x == 2 %}{% break %}{% endif %}{% else %}never{% endfor %}|{% for x in [1] %}{% continue %}{% else %}else-after-continue{% endfor %})J", R"J({})J", R"J(else-after-break||else-after-continue)J"},
    {R"J({% set a = 1 %}{% set c %}{% set a = 2 %}{{ a }}{% endset %}{{ a }}{{ c }})J", R"J({})J", R"J(12)J"},
    {R"J({% set a = 1 %}{% filter upper %}{% set a = 'x' %}{{ a }}{% endfilter %}{{ a }})J", R"J({})J", R"J(X1)J"},
    {R"J({% set ns = namespace(v=1) %}{% set c %}{% set ns.v = 2 %}{% endset %}{{ ns.v }})J", R"J({})J", R"J(2)J"},
    {R"J({% set a = 1 %}{% with %}{% set a = 2 %}{% endwith %}{{ a }}{% with b = a + 1 %}{{ b }}{% endwith %}{{ b }})J", R"J({})J", R"J(12)J"},
    {R"J({% set a = 1 %}{% for i in [1] %}{% set a = 5 %}{% macro m() %}{{ a }}{% endmacro %}{{ m() }}{% endfor %}{{ a }})J", R"J({})J", R"J(51)J"},
    {R"J({% macro m() %}{% set a = 'in' %}{{ a }}{% endmacro %}{% set a = 'out' %}{{ m() }}{{ a }})J", R"J({})J", R"J(inout)J"},
};

TEST(Jinja, StatementsMatchJinja2) {
  rf::test::expect_jinja_cases(kCases);
}

}  // namespace
