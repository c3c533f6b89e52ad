// Jinja expressions: literals, operators, attribute/item access, slices, tests, calls, methods.
// Each case: a template, its context (JSON) and the exact output Python
// Jinja2 3.1.6 gives when configured as transformers configures it
// (trim_blocks, lstrip_blocks, loop controls, transformers' tojson,
// strftime_now fixed at 2026-01-15); a null output means Jinja2 fails.
#include "unit/template_cases.h"

namespace {

using Case = rf::test::JinjaCase;  // source, context, expected (null: must fail)

const Case kCases[] = {
    {R"J({{ {'a':{'b':1}} }})J", R"J({})J", R"J({'a': {'b': 1}})J"},
    {R"J(a
  {# c #}
b)J", R"J({})J", R"J(a
b)J"},
    {R"J({{ 'a' }}
{{ 'b' }}
)J", R"J({})J", R"J(a
b)J"},
    {R"J({%+ if true %}x{% endif +%}
y)J", R"J({})J", R"J(x
y)J"},
    {R"J({{ x.y is defined }})J", R"J({})J", nullptr},
    {R"J({{ 'a\u00e9\n\x41' }})J", R"J({})J", R"J(aé
A)J"},
    {R"J({{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }})J", R"J({})J", R"J(True False)J"},
    {R"J({{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a b c'.split(' ', 1) }})J", R"J({})J", R"J(['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b c'])J"},
    {R"J({{ [1,2] + [3] }} {{ 'ab' * 3 }} {{ [0] * 3 }} {{ 3 * 'x' }})J", R"J({})J", R"J([1, 2, 3] ababab [0, 0, 0] xxx)J"},
    {R"J({{ 1 == 1.0 }} {{ true == 1 }} {{ 'a' == 'a' }} {{ [1,2] == [1,2] }} {{ (1,2) == [1,2] }})J", R"J({})J", R"J(True True True True False)J"},
    {R"J({{ 10 / 4 }} {{ 10 // 4 }} {{ 10 % 4 }} {{ 2 ** 10 }} {{ 2 ** -1 }} {{ 1.5 // 1 }} {{ -7.5 % 2 }})J", R"J({})J", R"J(2.5 2 2 1024 0.5 1.0 0.5)J"},
    {R"J({{ raise_exception('boom') }})J", R"J({})J", nullptr},
    {R"J({{ strftime_now('%d %b %Y') }} {{ strftime_now('%-d %B %Y %A') }})J", R"J({})J", R"J(15 Jan 2026 15 January 2026 Thursday)J"},
    {R"J({{ x is string }}{{ 1 is number }}{{ true is number }}{{ true is integer }}{{ 1.0 is float }}{{ {} is mapping }}{{ 'a' is iterable }}{{ 'a' is sequence }}{{ x is iterable }}{{ none is none }}{{ 3 is odd }}{{ 4 is divisibleby 2 }}{{ 'a' is eq 'a' }}{{ range is callable }}{{ true is boolean }}{{ 1 is true }}{{ true is true }})J", R"J({})J", R"J(FalseTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrue)J"},
    {R"J({{ 'a' in 'cab' }}{{ 1 in [1,2] }}{{ 'k' in {'k':1} }}{{ 'z' not in 'abc' }}{{ 'a' in x }})J", R"J({})J", R"J(TrueTrueTrueTrueFalse)J"},
    {R"J({{ 'a' + 1 }})J", R"J({})J", nullptr},
    {R"J({{ x + 1 }})J", R"J({})J", nullptr},
    {R"J({{ x() }})J", R"J({})J", nullptr},
    {R"J({{ 'a' ~ 1 ~ 1.0 ~ none ~ [1] }})J", R"J({})J", R"J(a11.0None[1])J"},
    {R"J({{ messages[0].content[0].text }})J", R"J({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})J", R"J(hi)J"},
    {R"J({{ '\n'.join(['a','b']) }} {{ 'a-b'.replace('-', '+') }} {{ 'abc'.startswith('ab') }} {{ 'abc'.endswith(('x','c')) }} {{ 'abcb'.find('b') }} {{ 'abcb'.count('b') }} {{ 'abcb'.rfind('b') }})J", R"J({})J", R"J(a
b a+b True True 1 2 3)J"},
    {R"J({{ -1 }}{{ +1 }}{{ not 1 }}{{ 1 and 2 }}{{ 0 or '' }}{{ none or 'z' }})J", R"J({})J", R"J(-11False2z)J"},
    {R"J({{ [1,2,3][1:] }}{{ [1,2,3][:-1] }}{{ [1,2,3][::2] }}{{ 'hello'[1:3] }}{{ 'hello'[-2:] }}{{ [1,2,3][-5:10] }})J", R"J({})J", R"J([2, 3][1, 2][1, 3]ello[1, 2, 3])J"},
    {R"J({{ messages[0]['nope'] is defined }} {{ messages[9] is defined }} {{ messages[-1].role }} {{ messages.0.role }})J", R"J({"messages": [{"role": "system", "content": "Sys"}, {"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image"}]}, {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris", "n": 3}}}]}, {"role": "tool", "tool_call_id": "call_1", "content": "{\"t\": 20}"}]})J", R"J(False False tool system)J"},
    {R"J({{ 'a' if true else 'b' }}{{ 'a' if false else 'b' }}{{ 'x' if none }}{{ 1 if 0 else 2 if 0 else 3 }})J", R"J({})J", R"J(ab3)J"},
    {R"J({{ not true == false }} {{ not 1 in [1] }} {{ 1 not in [2] }} {{ -2 ** 2 }} {{ (-2) ** 2 }} {{ 2 * 3 + 1 }} {{ 2 + 3 * 4 ~ 5 }} {{ 10 - 2 - 3 }} {{ 2 ** 3 ** 2 }})J", R"J({})J", nullptr},
    {R"J({{ 1 ~ 2 + 3 }} {{ 'a' ~ 'b' * 2 }} {{ 7 // 2 * 2 }} {{ -7 // 2 }} {{ 7 % -3 }} {{ 7.0 // 2 }} {{ 1e3 }} {{ 1_000 }} {{ 1.5e-7 }} {{ 0.1 * 3 }})J", R"J({})J", nullptr},
    {R"J({{ 1 / 0 }})J", R"J({})J", nullptr},
    {R"J({{ [1,2,3][::-1] }} {{ [1,2,3,4,5][1:4:2] }} {{ 'abcdef'[::2] }} {{ 'abc'[5:] }} {{ [1,2][-1:] }} {{ (1,2,3)[1:] }} {{ 'héllo'[1:3] }} {{ 'héllo'[::-1] }})J", R"J({})J", R"J([3, 2, 1] [2, 4] ace  [2] (2, 3) él olléh)J"},
    {R"J({{ 'a,b'.split(',') }}{{ ' a  b '.split() }}{{ 'a b c'.split(none, 1) }}{{ 'a,b,c'.rsplit(',', 1) }}{{ ''.split() }}{{ ''.split(',') }}{{ 'a  b c '.rsplit(None, 1) }})J", R"J({})J", R"J(['a', 'b']['a', 'b']['a', 'b c']['a,b', 'c'][]['']['a  b', 'c'])J"},
    {R"J({{ 'Hello'.startswith('He') }}{{ 'Hello'.endswith('lo') }}{{ 'Hello'.startswith(('x','H')) }}{{ 'héllo'.find('l') }}{{ 'abc'.find('z') }}{{ 'aaa'.count('a') }}{{ 'aaa'.count('') }})J", R"J({})J", R"J(TrueTrueTrue2-134)J"},
    {R"J({{ '{} and {}'.format('a', 'b') }} {{ '{1}{0}'.format('a', 'b') }} {{ '{x}'.format(x=5) }} {{ '{{}}'.format() }} {{ '{:>5}'.format('a') }})J", R"J({})J", R"J(a and b ba 5 {}     a)J"},
    {R"J({{ 'abc'.isalpha() }}{{ '123'.isdigit() }}{{ ' '.isspace() }}{{ 'abc'.islower() }}{{ 'ABC'.isupper() }}{{ 'a1'.isalnum() }}{{ ''.isdigit() }})J", R"J({})J", R"J(TrueTrueTrueTrueTrueTrueFalse)J"},
    {R"J({{ 'line1\nline2\r\nline3'.splitlines() }} {{ 'ab'.removeprefix('a') }}{{ 'ab'.removesuffix('b') }})J", R"J({})J", R"J(['line1', 'line2', 'line3'] ba)J"},
    {R"J({{ [1, 2] + [3] }}{{ (1,) + (2,) }}{{ 'ab' * 2 }}{{ [1] * 3 }}{{ 2 * [0] }}{{ 'a' * 0 }}{{ 'a' * -1 }})J", R"J({})J", R"J([1, 2, 3](1, 2)abab[1, 1, 1][0, 0])J"},
    {R"J({{ [1] + (2,) }})J", R"J({})J", nullptr},
    {R"J({{ none + 1 }})J", R"J({})J", nullptr},
    {R"J({{ 1 < 'a' }})J", R"J({})J", nullptr},
    {R"J({{ 'b' > 'a' }}{{ [1, 2] < [1, 3] }}{{ (1, 2) <= (1, 2) }}{{ 1 < 2.5 }}{{ true > false }}{{ none == none }}{{ none != 0 }}{{ 1 == '1' }}{{ {'a': 1} == {'a': 1} }}{{ [1] == [1.0] }})J", R"J({})J", R"J(TrueTrueTrueTrueTrueTrueTrueFalseTrueTrue)J"},
    {R"J({{ 1 is odd }}{{ 2 is even }}{{ 6 is divisibleby(3) }}{{ 6 is divisibleby 4 }}{{ x is undefined }}{{ none is none }}{{ 1 is none }}{{ 'a' is lower }}{{ 'A' is upper }}{{ 'a' is in 'abc' }}{{ 1 is in [1] }}{{ 1 is eq 1 }}{{ 1 is ne 2 }}{{ 1 is lt 2 }}{{ 2 is gt 1 }}{{ 1 is le 1 }}{{ 1 is ge 2 }}{{ 1 is sameas 1 }}{{ 'upper' is filter }}{{ 'odd' is test }}{{ 'nope' is filter }})J", R"J({})J", R"J(TrueTrueTrueFalseTrueTrueFalseTrueTrueTrueTrueTrueTrueTrueTrueTrueFalseTrueTrueTrueFalse)J"},
    {R"J({{ x is defined and x.y }}{{ x is not defined or x.y }})J", R"J({})J", R"J(FalseTrue)J"},
    {R"J({{ raise_exception('bad ' ~ 1) }})J", R"J({})J", nullptr},
    {R"J({{ range(1, 2, 0) }})J", R"J({})J", nullptr},
    {R"J({{ dict(a=1, b=2) }}{{ dict({'c': 3}) }}{{ dict([('d', 4)]) }}{{ namespace(a=1).a }}{{ namespace({'b': 2}).b }})J", R"J({})J", R"J({'a': 1, 'b': 2}{'c': 3}{'d': 4}12)J"},
    {R"J({{ x.y }})J", R"J({"x": {}})J", R"J()J"},
    {R"J({{ x.y.z }})J", R"J({"x": {}})J", nullptr},
    {R"J({{ x[0] }})J", R"J({"x": null})J", R"J()J"},
    {R"J({{ x() }})J", R"J({"x": 1})J", nullptr},
    {R"J({{ 'abc'() }})J", R"J({})J", nullptr},
    {R"J({{ 'a'.nomethod() }})J", R"J({})J", nullptr},
    {R"J({{ 'a'.nomethod }})J", R"J({})J", R"J()J"},
    {R"J({{ {'a': 1}.nomethod() }})J", R"J({})J", nullptr},
    {R"J({{ foo(1) }})J", R"J({})J", nullptr},
    {R"J({{ ''.join(['a', 'b']) }}{{ ', '.join(['a']) }}{{ '-'.join('abc') }})J", R"J({})J", R"J(abaa-b-c)J"},
    {R"J({{ ''.join([1, 2]) }})J", R"J({})J", nullptr},
    {R"J({{ 'a' in ['a'] }}{{ 'a' in {'a': 1} }}{{ 'ab' in 'cabd' }}{{ 1 in 'abc' }})J", R"J({})J", nullptr},
    {R"J({{ 1 in 5 }})J", R"J({})J", nullptr},
    {R"J({{ [none, true, 1.5, 'a"b', "it's", 'both\'"'] }}{{ {'k': (1,)} }}{{ ['\n\t\x00\u00a0é'] }})J", R"J({})J", R"J([None, True, 1.5, 'a"b', "it's", 'both\'"']{'k': (1,)}['\n\t\x00\xa0é'])J"},
    {R"J({{ 1.0 }} {{ 100.0 }} {{ 1e15 }} {{ 1e16 }} {{ 1.5e-5 }} {{ 0.0001 }} {{ -0.0 }} {{ 3.0e0 }} {{ 123456789.123456789 }} {{ 2.0 ** 0.5 }} {{ 10 / 3 }})J", R"J({})J", R"J(1.0 100.0 1000000000000000.0 1e+16 1.5e-05 0.0001 -0.0 3.0 123456789.12345679 1.4142135623730951 3.3333333333333335)J"},
    {R"J({{ 'a' 'b' "c" }}{{ '\x41\u0042\U00000043\101\q' }})J", R"J({})J", R"J(abcABCA\q)J"},
    {R"J({{ {'a': 1, 'a': 2} }}{{ {1: 'x', 1.0: 'y', true: 'z'} }})J", R"J({})J", R"J({'a': 2}{1: 'z'})J"},
    {R"J({{ [] }}{{ () }}{{ {} }}{{ (1) }}{{ (1,) }}{{ [1,] }}{{ {'a':1,} }})J", R"J({})J", R"J([](){}1(1,)[1]{'a': 1})J"},
    {R"J({{ a, b }})J", R"J({"a": 1, "b": 2})J", R"J((1, 2))J"},
    {R"J({{ 'unterminated }})J", R"J({})J", nullptr},
    {R"J({% endif %})J", R"J({})J", nullptr},
    {R"J({{ }})J", R"J({})J", nullptr},
    {R"J({{ 1 + }})J", R"J({})J", nullptr},
    {R"J({{ [1, 2 }})J", R"J({})J", nullptr},
    {R"J({{ x is }})J", R"J({})J", nullptr},
    {R"J({# unterminated comment)J", R"J({})J", nullptr},
    {R"J({% include 'x' %})J", R"J({})J", nullptr},
    {R"J({{ 'a' ~ }})J", R"J({})J", nullptr},
    {R"J(a {{ '}}' }} b {{ "{%" }} c)J", R"J({})J", R"J(a }} b {% c)J"},
    {R"J({{ {'a': {'b': 1}} }})J", R"J({})J", R"J({'a': {'b': 1}})J"},
    {R"J({{ x ~ 'a' }}{{ x or 'b' }}{{ x and 'c' }}{{ not x }}{{ x == none }}{{ x != 1 }}{{ 'k' in x }})J", R"J({})J", R"J(abTrueFalseTrueFalse)J"},
    {R"J({{ x < 1 }})J", R"J({})J", nullptr},
    {R"J({{ -x }})J", R"J({})J", nullptr},
    {R"J({{ x[1:] }})J", R"J({})J", nullptr},
    {R"J({{ x.attr }})J", R"J({})J", nullptr},
    {R"J({{ x['k'] }})J", R"J({})J", nullptr},
    {R"J({{ '{a}-{b}'.format(a=1, b='x') }}{{ '{0}{0}'.format('z') }})J", R"J({})J", R"J(1-xzz)J"},
    {R"J({{ '{'.format() }})J", R"J({})J", nullptr},
    {R"J({{ '{5}'.format(1) }})J", R"J({})J", nullptr},
    {R"J({{ 'a'.format(1, 2) }})J", R"J({})J", R"J(a)J"},
    {R"J({{ '%s %s' % ('a',) }})J", R"J({})J", nullptr},
    {R"J({{ '%s' % ('a', 'b') }})J", R"J({})J", nullptr},
    {R"J({{ '%d' % 'x' }})J", R"J({})J", nullptr},
    {R"J({{ x.0 }}{{ x.1.a }})J", R"J({"x": ["z", {"a": "q"}]})J", R"J(zq)J"},
    {R"J({{ (x) }}{{ ((1, 2))[0] }}{{ [1, 2][0] + [3][0] }}{{ {'a': [1, {'b': 2}]}['a'][1]['b'] }})J", R"J({"x": 5})J", R"J(5142)J"},
    {R"J({{ 'abc'[1] }}{{ 'abc'[-1] }}{{ 'abc'[10] is defined }}{{ 'abc'[0:-1] }})J", R"J({})J", R"J(bcFalseab)J"},
    {R"J({{ [1,2,3][1:2:0] }})J", R"J({})J", nullptr},
    {R"J({{ [1, 2, 3][True] }}{{ [1,2][1.0] }})J", R"J({})J", R"J(2)J"},
    {R"J({{ 1 if x else 2 }}{{ x if x is defined else 'nx' }})J", R"J({})J", R"J(2nx)J"},
    {R"J({{ true and 'a' or 'b' }}{{ false and 'a' or 'b' }}{{ none or [] or 'c' }}{{ [] and 1 }}{{ 0 or 0.0 }})J", R"J({})J", R"J(abc[]0.0)J"},
    {R"J({{ not not 1 }}{{ not (1 and 0) }}{{ not 1 == 2 }})J", R"J({})J", R"J(TrueTrueTrue)J"},
    {R"J({{ ns.a }})J", R"J({})J", nullptr},
    {R"J({{- 'a' -}}   

  {{- 'b' }}  {{ 'c' -}}  
 d)J", R"J({})J", R"J(ab  cd)J"},
    {R"J({#- comment -#}  x  {#+ c +#}  y
{# c #}
z)J", R"J({})J", R"J(x    y
z)J"},
    {"a\r\nb\r{{ 'c' }}\r\n", R"J({})J", R"J(a
b
c)J"},
    {R"J(x
)J", R"J({})J", R"J(x)J"},
    {R"J(x

)J", R"J({})J", R"J(x
)J"},
    {R"J(
)J", R"J({})J", R"J()J"},
    {R"J()J", R"J({})J", R"J()J"},
    {R"J({{ 0x10 }})J", R"J({})J", R"J(16)J"},
    {R"J({{ 1.e5 }})J", R"J({})J", R"J()J"},
    {R"J({{ .5 }})J", R"J({})J", nullptr},
    {R"J({{ 1_000_000 }}{{ 1__0 }})J", R"J({})J", nullptr},
    {R"J({{ 'a' ! 'b' }})J", R"J({})J", nullptr},
    {R"J({{ a.b.c }})J", R"J({"a": {"b": null}})J", R"J()J"},
    {R"J({{ a['b']['c'] }})J", R"J({"a": {"b": {}}})J", R"J()J"},
    {R"J({{ a.b['c'].d }})J", R"J({"a": {"b": {}}})J", nullptr},
    {R"J({{ loop }})J", R"J({})J", R"J()J"},
    {R"J({{ messages[0].content + 'x' }})J", R"J({"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]})J", nullptr},
    {R"J({{ {'a': 1}.keys()[0] }})J", R"J({})J", R"J()J"},
    {R"J({{ 4.0 is divisibleby 2 }}{{ 3.0 is odd }}{{ 2.5 is even }})J", R"J({})J", R"J(TrueTrueFalse)J"},
};

TEST(Jinja, ExpressionsMatchJinja2) {
  rf::test::expect_jinja_cases(kCases);
}

}  // namespace
