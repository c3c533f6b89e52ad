// Jinja filters, with Jinja2 semantics (tojson as transformers defines it).
// Each case: a template, its context (JSON) and the exact output Python
// Jinja2 3.1.6 gives when configured as transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, transformers' tojson,
// strftime_now fixed at 2026-01-15); a null output means Jinja2 fails.
#include "unit/template_cases.h"

namespace {

using Case = rf::test::JinjaCase;  // source, context, expected (null: must fail)

const Case kCases[] = {
    {R"J({{ none.y }}|{{ [1][5] }}|{{ 'ab'.zz }})J", R"J({})J", R"J(||)J"},
    {R"J({{ 1 if false }}|{{ (1,) }}|{{ () }}|{{ {1:2, 'a':none} }})J", R"J({})J", R"J(|(1,)|()|{1: 2, 'a': None})J"},
    {R"J({{ 'it''s' }}{{ "it's" }}|{{ ["it's", 'a"b', 'a\'"b'] }})J", R"J({})J", R"J(itsit's|["it's", 'a"b', 'a\'"b'])J"},
    {R"J({{ -3|abs }} {{ 2.5|round }} {{ 3.5|round }} {{ 2.567|round(2) }} {{ 3|round }})J", R"J({})J", R"J(3 2.0 4.0 2.57 3)J"},
    {R"J({{ 'Hello World-foo(bar)'|title }} {{ 'hello wORLD'.title() }} {{ 'hELLO'|capitalize }})J", R"J({})J", R"J(Hello World-Foo(Bar) Hello World Hello)J"},
    {R"J({{ ['b','A','a','C']|sort }} {{ ['b','A','a','C']|unique|list }})J", R"J({})J", R"J(['A', 'a', 'b', 'C'] ['b', 'A', 'C'])J"},
    {R"J({{ '  x  '|trim }}|{{ 'xxaxx'.strip('x') }}|{{ 'abc'|center(9) }}|)J", R"J({})J", R"J(x|a|   abc   |)J"},
    {R"J({{ 'line1
line2

line3'|indent(2) }}|{{ 'a
b'|indent(2, true) }})J", R"J({})J", R"J(line1
  line2

  line3|  a
  b)J"},
    {R"J({{ [1,2,3,4,5]|batch(2)|list }} {{ 'a b c'|wordcount }})J", R"J({})J", R"J([[1, 2], [3, 4], [5]] 3)J"},
    {R"J({{ '%s-%d'|format('a', 3) }} {{ '{}-{x}'.format(1, x=2) }} {{ 'a%sb' % 'X' }})J", R"J({})J", R"J(a-3 1-2 aXb)J"},
    {R"J({{ range(5)|list }} {{ range(1, 10, 3)|list }} {{ range(5, 0, -2)|list }})J", R"J({})J", R"J([0, 1, 2, 3, 4] [1, 4, 7] [5, 3, 1])J"},
    {R"J({{ xs|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(',') }})J", R"J({"xs": [{"role": "user", "content": "a"}, {"role": "bot", "content": "b"}, {"role": "user", "content": "c"}]})J", R"J(a,c)J"},
    {R"J({{ xs|map('upper')|list }} {{ xs|select('equalto','a')|list }} {{ [1,2,3,4]|select('odd')|list }} {{ [0,1,'',none]|select|list }})J", R"J({"xs": ["a", "b"]})J", R"J(['A', 'B'] ['a'] [1, 3] [1])J"},
    {R"J({{ xs|tojson }}|{{ xs|tojson(indent=2) }}|{{ 'x'|tojson }}|{{ 1.0|tojson }}|{{ {'a':[]}|tojson(indent=2) }})J", R"J({"xs": [{"a": "é<>&'", "b": [1, 2.5, null, true]}, []]})J", R"J([{"a": "é<>&'", "b": [1, 2.5, null, true]}, []]|[
  {
    "a": "é<>&'",
    "b": [
      1,
      2.5,
      null,
      true
    ]
  },
  []
]|"x"|1.0|{
  "a": []
})J"},
    {R"J({{ x|default('d') }} {{ ''|default('d') }} {{ ''|default('d', true) }} {{ none|default('d') }} {{ x|d('e') }})J", R"J({})J", R"J(d  d None e)J"},
    {R"J({{ 'abc'|first }} {{ [1,2]|last }} {{ []|first }}| {{ 'héllo'|upper }} {{ 'ÀÉ'|lower }} {{ 'straße'|upper }})J", R"J({})J", R"J(a 2 | HÉLLO àé STRASSE)J"},
    {R"J({{ [3,1,2]|sort(reverse=true) }} {{ xs|sort(attribute='n')|map(attribute='n')|list }} {{ [1,2,3]|reverse|list }} {{ 'abc'|reverse }})J", R"J({"xs": [{"n": 2}, {"n": 1}]})J", R"J([3, 2, 1] [1, 2] [3, 2, 1] cba)J"},
    {R"J({{ 1.5|int }} {{ '12'|int + 1 }} {{ 'x'|float }} {{ 7|string + 'a' }} {{ [1,2]|string }} {{ none|string }} {{ 'abc'|list }} {{ {'a':1}|list }})J", R"J({})J", R"J(1 13 0.0 7a [1, 2] None ['a', 'b', 'c'] ['a'])J"},
    {R"J({{ foo|nofilter }})J", R"J({})J", nullptr},
    {R"J({{ d.get('a') }} {{ d.get('z', 5) }} {{ d.get('z') }} {{ d.values()|list }} {{ d.keys()|list }} {{ [1,2,3].index(2) }})J", R"J({"d": {"a": 1}})J", R"J(1 5 None [1] ['a'] 1)J"},
    {R"J({{ messages | tojson }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J([{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}])J"},
    {R"J({{ messages | tojson(indent=4) }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J([
    {
        "role": "system",
        "content": "Sys"
    },
    {
        "role": "user",
        "content": [
            {
                "type": "text",
                "text": "Hi"
            },
            {
                "type": "image"
            }
        ]
    },
    {
        "role": "assistant",
        "content": null,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {
                    "name": "get_weather",
                    "arguments": {
                        "city": "Paris",
                        "n": 3
                    }
                }
            }
        ]
    },
    {
        "role": "tool",
        "tool_call_id": "call_1",
        "content": "{\"t\": 20}"
    }
])J"},
    {R"J({{ tools[0] | tojson(indent=2, sort_keys=true) }}|{{ tools|tojson(separators=(',', ':')) }})J", R"J({"tools": [{"type": "function", "function": {"name": "f", "description": "Does é things", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}]})J", R"J({
  "function": {
    "description": "Does é things",
    "name": "f",
    "parameters": {
      "properties": {
        "x": {
          "type": "integer"
        }
      },
      "required": [
        "x"
      ],
      "type": "object"
    }
  },
  "type": "function"
}|[{"type":"function","function":{"name":"f","description":"Does é things","parameters":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}}}])J"},
    {R"J({{ messages[1:]|map(attribute='role')|join(',') }} {{ messages|selectattr('content', 'string')|list|length }} {{ messages|rejectattr('tool_calls')|map(attribute='role')|list }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(user,assistant,tool 2 ['system', 'user', 'tool'])J"},
    // Functionary v3.1 without tools: none through the lazy filters is empty (Jinja2's `if value:`).
    {R"J({{ tools|selectattr('type', 'equalto', 'code_interpreter')|list }}|{{ none|rejectattr('x')|list }}|{{ none|map(attribute='a')|list }}|{{ none|select|list }})J", R"J({"tools": null})J", R"J([]|[]|[]|[])J"},
    {R"J({{ messages|selectattr('role','in',['user','tool'])|map(attribute='role')|list }} {{ messages|map(attribute='missing', default='d')|list }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(['user', 'tool'] ['d', 'd', 'd', 'd'])J"},
    {R"J({{ 'x'|length }}{{ [1,2]|count }}{{ {'a':1}|length }}{{ ''|length }}{{ undefined_thing|length }})J", R"J({})J", R"J(12100)J"},
    {R"J({{ 5|length }})J", R"J({})J", nullptr},
    {R"J({{ ' a b '|trim }}|{{ '　x '|trim }}|{{ 'xxhixx'|trim('x') }}|{{ '  a'.lstrip() }}|{{ 'a  '.rstrip() }}|{{ 'abc'.strip('ac') }})J", R"J({})J", R"J(a b|x|hi|a|a|b)J"},
    {R"J({{ 'a-b-c'.replace('-', '+', 1) }}{{ 'abc'.replace('', '|') }}{{ 'hello world'.title() }}{{ 'hELLO wORLD'.capitalize() }}{{ 'ABC'.lower() }}{{ 'abc'.upper() }})J", R"J({})J", R"J(a+b-c|a|b|c|Hello WorldHello worldabcABC)J"},
    {R"J({{ '5'.zfill(3) }}{{ 'ab'.center(6, '*') }}{{ 'ab'.ljust(4) }}|{{ 'ab'.rjust(4, '.') }}|{{ 'a:b:c'.partition(':') }})J", R"J({})J", R"J(005**ab**ab  |..ab|('a', ':', 'b:c'))J"},
    {R"J({{ d.get('a') }}{{ d.get('b', 'dflt') }}{{ d.keys()|list }}{{ d.values()|list }}{{ d.items()|list }}{{ d['a'] }}{{ d.a }})J", R"J({"d": {"a": 1, "items": 2}})J", R"J(1dflt['a', 'items'][1, 2][('a', 1), ('items', 2)]11)J"},
    {R"J({{ ['b', 'a', 'C']|sort }}{{ ['b', 'a', 'C']|sort(case_sensitive=true) }}{{ [{'n': 'b'}, {'n': 'a'}]|sort(attribute='n')|map(attribute='n')|join }}{{ ['a','A','b']|unique(case_sensitive=true)|list }})J", R"J({})J", R"J(['a', 'b', 'C']['C', 'a', 'b']ab['a', 'A', 'b'])J"},
    {R"J({{ [1, 'a']|sort }})J", R"J({})J", nullptr},
    {R"J({{ [1,2,3,4,5]|batch(2, 'x')|list }}{{ 'hello world foo'|wordcount }}{{ 'hi'|center(6) }}|{{ '<a href="x">t</a>'|striptags }}{{ '<&>"\''|escape }}{{ 'x'|safe }}{{ 'ab'|e }})J", R"J({})J", R"J([[1, 2], [3, 4], [5, 'x']]3  hi  |t&lt;&amp;&gt;&#34;&#39;xab)J"},
    {R"J({{ 3.7|round }}{{ 3.14159|round(2) }}{{ 2.5|round(0, 'floor') }}{{ 2.1|round(0, 'ceil') }}{{ -1.5|round }}{{ 0.5|round }}{{ 1.25|round(1) }}{{ 2.675|round(2) }})J", R"J({})J", R"J(4.03.142.03.0-2.00.01.22.67)J"},
    {R"J({{ -5|abs }}{{ -5.5|abs }}{{ '42'|int }}{{ '4.7'|int }}{{ ' 7 '|int }}{{ 'x'|int(9) }}{{ '0x1A'|int(0, 16) }}{{ 'ff'|int(base=16) }}{{ true|int }}{{ none|int }})J", R"J({})J", R"J(55.5424792625510)J"},
    {R"J({{ '1.5'|float }}{{ 'x'|float(2.5) }}{{ 3|float }}{{ '1e3'|float }}{{ 1|string }}{{ none|string }}{{ true|string }}{{ [1]|string }}{{ 1.0|string }})J", R"J({})J", R"J(1.52.53.01000.01NoneTrue[1]1.0)J"},
    {R"J({{ {'a': 1}|items|list }}{{ x|items|list }}{{ {'b': 2, 'a': 1}|dictsort }}{{ {'b': 2, 'a': 1}|dictsort(by='value', reverse=true) }})J", R"J({})J", R"J([('a', 1)][][('a', 1), ('b', 2)][('b', 2), ('a', 1)])J"},
    {R"J({{ 'a\nb\n\nc'|indent }}|{{ 'a\nb'|indent(2, first=true) }}|{{ 'a\n\nb'|indent(2, blank=true) }}|{{ ''|indent }}|{{ 'x\n'|indent(1) }}|{{ 'a'|indent('>> ', true) }})J", R"J({})J", R"J(a
    b

    c|  a
  b|a
  
  b||x
|>> a)J"},
    {R"J({{ 'Hello World'|truncate(5) }}|{{ 'Hello World foo bar baz qux'|truncate(12) }}|{{ 'Hello World foo'|truncate(9, true) }}|{{ 'Hello World foo bar baz qux'|truncate(12, false, '..', 0) }})J", R"J({})J", R"J(He...|Hello...|Hello ...|Hello..)J"},
    {R"J({{ '%s is %d years' % ('Bob', 30) }} {{ '%.2f' % 3.14159 }} {{ '%5s|%-5s|' % ('a', 'b') }} {{ '%(a)s-%(b)s' % {'a': 1, 'b': 2} }} {{ '%x %o %%' % (255, 8) }} {{ '%r' % 'q' }})J", R"J({})J", R"J(Bob is 30 years 3.14     a|b    | 1-2 ff 10 % 'q')J"},
    {R"J({{ 'x %s' % none }} {{ '%s' % [1, 2] }} {{ '%s %s' | format('a', 'b') }} {{ '%(n)s' | format(n='kw') }})J", R"J({})J", R"J(x None [1, 2] a b kw)J"},
    {R"J({{ messages is defined and messages|length > 0 }}{{ msgs is not defined }}{{ (messages|first).role }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(TrueTruesystem)J"},
    {R"J({{ range(3)|list }}{{ range(2, 5)|list }}{{ range(10, 0, -3)|list }}{{ range(0)|list }}{{ range(-2)|list }})J", R"J({})J", R"J([0, 1, 2][2, 3, 4][10, 7, 4, 1][][])J"},
    {R"J({{ range(10**9)|length }})J", R"J({})J", nullptr},
    {R"J({{ strftime_now('%Y-%m-%d %H:%M:%S') }}|{{ strftime_now('%A %a %B %b %d %-d %j %U %w %y %m %e %p') }}|{{ strftime_now('') }})J", R"J({})J", R"J(2026-01-15 00:00:00|Thursday Thu January Jan 15 15 015 02 4 26 01 15 AM|)J"},
    {R"J({{ [1,2]|join }}{{ [1,2]|join('|') }}{{ [{'a':'x'},{'a':'y'}]|join(',', attribute='a') }}{{ 'abc'|join('.') }})J", R"J({})J", R"J(121|2x,ya.b.c)J"},
    {R"J({{ {'a': 1, 'b': 2}|tojson }}{{ [1, 1.5, 'x', true, false, none, [], {}]|tojson }}{{ 'é\n\t"\\\u0001'|tojson }}{{ 1e100|tojson }}{{ (1, 2)|tojson }})J", R"J({})J", R"J({"a": 1, "b": 2}[1, 1.5, "x", true, false, null, [], {}]"é\n\t\"\\\u0001"1e+100[1, 2])J"},
    {R"J({{ x|tojson }})J", R"J({})J", nullptr},
    {R"J({{ namespace(a=1)|tojson }})J", R"J({})J", nullptr},
    {R"J({{ 'Hi'|tojson(indent='\t') }}{{ [1,[2]]|tojson(indent=0) }}{{ {}|tojson(indent=2) }}{{ {'a':{}}|tojson(indent=1) }})J", R"J({})J", R"J("Hi"[
1,
[
2
]
]{}{
 "a": {}
})J"},
    {R"J({{ x | }})J", R"J({})J", nullptr},
    {R"J({{ [1,2,3]|select('gt', 1)|list }}{{ [1,2,3]|reject('odd')|list }}{{ [1,2,3]|map('string')|join('-') }}{{ ['a','b']|map('upper')|list }}{{ [1.5,2.5]|map('round')|list }}{{ [[1,2],[3]]|map('length')|list }})J", R"J({})J", R"J([2, 3][2]1-2-3['A', 'B'][2.0, 2.0][2, 1])J"},
    {R"J({{ users|selectattr('active')|map(attribute='name')|list }}{{ users|rejectattr('active')|map(attribute='name')|list }}{{ users|selectattr('age', 'gt', 20)|map(attribute='name')|list }}{{ users|map(attribute='info.city')|list }}{{ users|sort(attribute='age')|map(attribute='name')|list }}{{ users|sort(attribute='age', reverse=true)|map(attribute='name')|list }}{{ users|max(attribute='age') }}{{ users|sum(attribute='age') }})J", R"J({"users": [{"name": "a", "active": true, "age": 30, "info": {"city": "X"}}, {"name": "b", "active": false, "age": 20, "info": {"city": "Y"}}, {"name": "c", "age": 25, "info": {"city": "Z"}}]})J", R"J(['a']['b', 'c']['a', 'c']['X', 'Y', 'Z']['b', 'c', 'a']['a', 'c', 'b']{'name': 'a', 'active': True, 'age': 30, 'info': {'city': 'X'}}75)J"},
    {R"J({{ x|default }}|{{ x|default('a') }}|{{ none|default('a', true) }}|{{ 0|d('z', true) }}|{{ false|default('f') }})J", R"J({})J", R"J(|a|a|z|False)J"},
    {R"J({{ x|upper }}{{ x|lower }}{{ x|trim }}{{ x|list }}{{ x|join }}{{ x|first }}{{ x|string }}{{ x|int }}{{ x|float }}{{ x|sort }}{{ x|unique|list }}{{ x|reverse }}{{ x|wordcount }}{{ x|capitalize }}{{ x|title }}{{ x|selectattr('a')|list }})J", R"J({})J", nullptr},
    {R"J({{ '{:.2f}|{:,}|{:08.3f}|{:x}|{:#x}|{:+d}|{:^10}|{:*^9}|{!r}|{:>6.2%}|{:e}|{:g}|{:b}|{:o}|{:5}|{:<5}|{:05d}|{:,.2f}|{:s}'.format(3.14159, 1234567, -3.14159, 255, 255, 5, 'mid', 'x', 'q', 0.256, 12345.678, 0.00001234, 5, 8, 42, 42, -42, 1234567.891, 'str') }})J", R"J({})J", R"J(3.14|1,234,567|-003.142|ff|0xff|+5|   mid    |****x****|'q'|25.60%|1.234568e+04|1.234e-05|101|10|   42|42   |-0042|1,234,567.89|str)J"},
    {R"J({{ '{}'.format(1.0) }}{{ '{}'.format(none) }}{{ '{}'.format([1, 'a']) }}{{ '{}'.format(true) }}{{ '{:d}'.format(true) }}{{ '{:.3}'.format(3.14159) }}{{ '{:.3}'.format('abcdef') }}{{ '{:10.3f}|'.format(2.5) }})J", R"J({})J", R"J(1.0None[1, 'a']True13.14abc     2.500|)J"},
    {R"J({{ '%-6s|%6.2f|%03d|%+d|%5.1f%%' % ('ab', 3.14159, 7, 5, 99.5) }})J", R"J({})J", R"J(ab    |  3.14|007|+5| 99.5%)J"},
    {R"J({{ [1, 2, 3]|map('int')|sum }}{{ ['1', '2']|map('int')|list }}{{ ['a', 'b']|map('replace', 'a', 'z')|list }}{{ [' a ']|map('trim')|first }})J", R"J({})J", R"J(6[1, 2]['z', 'b']a)J"},
    {R"J({{ messages|selectattr('role', 'equalto', 'user')|list|last }}{{ (messages|selectattr('role', 'eq', 'user')|first).content }}{{ messages|selectattr('role', '==', 'user')|list|length }})J", R"J({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})J", R"J({'role': 'user', 'content': 'c'}a2)J"},
    {R"J({{ messages|selectattr('role', 'nosuchtest')|list }})J", R"J({"messages": [{"role": "user"}]})J", nullptr},
    {R"J({{ [1,2]|map('nosuchfilter')|list }})J", R"J({})J", nullptr},
    {R"J({{ [3,1]|sort|join(',') }}{{ 'cba'|sort|join }}{{ {'b':1,'a':2}|sort }})J", R"J({})J", R"J(1,3abc['a', 'b'])J"},
    {R"J({{ tools|tojson(indent=4) }})J", R"J({"tools": [{"type": "function", "function": {"name": "get_current_temperature", "description": "Get the current temperature at a location.", "parameters": {"type": "object", "properties": {"location": {"type": "string", "description": "The location to get the temperature for, in the format \"City, Country\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["location", "unit"]}, "return": {"type": "number"}}}]})J", R"J([
    {
        "type": "function",
        "function": {
            "name": "get_current_temperature",
            "description": "Get the current temperature at a location.",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The location to get the temperature for, in the format \"City, Country\""
                    },
                    "unit": {
                        "type": "string",
                        "enum": [
                            "celsius",
                            "fahrenheit"
                        ]
                    }
                },
                "required": [
                    "location",
                    "unit"
                ]
            },
            "return": {
                "type": "number"
            }
        }
    }
])J"},
    {R"J({{ 'tab\there'|tojson }}{{ '\u2028'|tojson }}{{ '\x7f'|tojson }}{{ '</script>'|tojson }})J", R"J({})J", R"J("tab\there"" """"</script>")J"},
    {R"J({{ '日本語'|length }}{{ '日本語'[1] }}{{ '日本語'|reverse }}{{ '日本語'|list }}{{ '🦙x'|length }}{{ '🦙x'[0] }})J", R"J({})J", R"J(3本語本日['日', '本', '語']2🦙)J"},
    {R"J({{ 'a  b\tc\nd'|wordcount }}{{ 'héllo wörld_x 123'|wordcount }}{{ '日本 語'|wordcount }})J", R"J({})J", R"J(432)J"},
    {R"J({{ '  \u00a0x\u2003 '|trim|length }}{{ 'x\u200b'|trim|length }})J", R"J({})J", R"J(12)J"},
    {"{{ '\\r\\n' }}|{{ 'x\r\ny' }}", R"J({})J", "\r\n|x\ny"},
    {R"J({{ messages[0]['content'][0]['text']|trim }})J", R"J({"messages": [{"role": "user", "content": [{"type": "text", "text": "  hi  "}]}]})J", R"J(hi)J"},
    {R"J({{ (messages[0].content|first).text }}{{ messages[0].content|selectattr('type', 'equalto', 'text')|map(attribute='text')|join('') }})J", R"J({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, {"type": "image_url"}, {"type": "text", "text": "!"}]}]})J", R"J(hihi!)J"},
    {R"J({{ [1, 2]|map('string')|length }})J", R"J({})J", nullptr},
    {R"J({{ [1, 2]|select|last }})J", R"J({})J", nullptr},
    {R"J({{ {'a': 1}.items() }}{{ {'a': 1}.keys() }}{{ {'a': 1}.values() }}{{ {'a': 1}.items()|length }}{{ {'a': 1}.keys()|list }})J", R"J({})J", R"J(dict_items([('a', 1)])dict_keys(['a'])dict_values([1])1['a'])J"},
    {R"J({{ ([1]|select)[0] }})J", R"J({})J", R"J()J"},
    {R"J({{ [1]|select is sequence }}{{ [1]|select is iterable }}{{ {}.items() is sequence }})J", R"J({})J", R"J(FalseTrueFalse)J"},
    {R"J({{ [1]|select|tojson }})J", R"J({})J", nullptr},
    {R"J({{ [1]|select + [2] }})J", R"J({})J", nullptr},
    {R"J({{ xs|selectattr('role', 'equalto', 'user')|first }}{{ (xs|selectattr('role', 'equalto', 'user')|list)[0].c }})J", R"J({"xs": [{"role": "user", "c": 1}]})J", R"J({'role': 'user', 'c': 1}1)J"},
};

TEST(Jinja, FiltersMatchJinja2) {
  rf::test::expect_jinja_cases(kCases);
}

}  // namespace
