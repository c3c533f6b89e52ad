// Chat templates in the style of DeepSeek V3/R1 (namespace, unicode tokens),
// Command-R (macros, loop controls) and Llama 3.1 with tools, written for these tests,
// rendered for a set of conversations with and without the generation prompt.
// The expected strings are what Python Jinja2 3.1.6 renders when configured
// as Hugging Face transformers configures it (trim_blocks, lstrip_blocks,
// loop controls, tojson without ASCII escaping, raise_exception,
// strftime_now fixed at 2026-01-15), bos "<s>", eos "</s>".
#include <map>
#include <string>

#include "unit/template_cases.h"

namespace {

const std::map<std::string, std::string> kTemplates = {
    {"deepseek", R"J({%- set ns = namespace(system_prompt='', is_first_sp=true, is_tool=false, is_first_call=true, is_output_first=true) -%}
{%- for message in messages if message['role'] == 'system' -%}
    {%- if ns.is_first_sp -%}
        {%- set ns.system_prompt = ns.system_prompt + message['content'] -%}
        {%- set ns.is_first_sp = false -%}
    {%- else -%}
        {%- set ns.system_prompt = ns.system_prompt + '\n\n' + message['content'] -%}
    {%- endif -%}
{%- endfor -%}
{{- bos_token }}{{ ns.system_prompt }}
{%- for message in messages -%}
    {%- if message['role'] == 'user' -%}
        {%- set ns.is_tool = false -%}
        {{- '<｜User｜>' + message['content'] -}}
    {%- elif message['role'] == 'assistant' and message['tool_calls'] is defined and message['tool_calls'] -%}
        {%- set ns.is_tool = false -%}
        {%- for tool in message['tool_calls'] -%}
            {%- if ns.is_first_call -%}
                {{- '<｜Assistant｜><｜tool▁calls▁begin｜>' -}}
                {%- set ns.is_first_call = false -%}
            {%- else -%}
                {{- '\n' -}}
            {%- endif -%}
            {{- '<｜tool▁call▁begin｜>' + tool['type'] + '<｜tool▁sep｜>' + tool['function']['name'] + '\n```json\n' + tool['function']['arguments'] | tojson + '\n```<｜tool▁call▁end｜>' -}}
        {%- endfor -%}
        {{- '<｜tool▁calls▁end｜><｜end▁of▁sentence｜>' -}}
    {%- elif message['role'] == 'assistant' -%}
        {%- set content = message['content'] -%}
        {%- if '</think>' in content -%}
            {%- set content = content.split('</think>')[-1].lstrip('\n') -%}
        {%- endif -%}
        {%- if ns.is_tool -%}
            {{- '<｜tool▁outputs▁end｜>' + content + '<｜end▁of▁sentence｜>' -}}
            {%- set ns.is_tool = false -%}
        {%- else -%}
            {{- '<｜Assistant｜>' + content + '<｜end▁of▁sentence｜>' -}}
        {%- endif -%}
    {%- elif message['role'] == 'tool' -%}
        {%- set ns.is_tool = true -%}
        {%- if ns.is_output_first -%}
            {{- '<｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' -}}
            {%- set ns.is_output_first = false -%}
        {%- else -%}
            {{- '\n<｜tool▁output▁begin｜>' + message['content'] + '<｜tool▁output▁end｜>' -}}
        {%- endif -%}
    {%- endif -%}
{%- endfor -%}
{%- if ns.is_tool -%}{{ '<｜tool▁outputs▁end｜>' }}{%- endif -%}
{%- if add_generation_prompt and not ns.is_tool -%}{{ '<｜Assistant｜><think>\n' }}{%- endif -%}
)J"},
    {"command_r", R"J({{ bos_token }}{%- macro tool_result(msg) -%}
{
    "tool_call_id": "{{ msg.tool_call_id }}",
    "results": {{ msg.content | tojson }}
}
{%- endmacro -%}
{%- macro turn(role, body) -%}
<|START_OF_TURN_TOKEN|><|{{ role | upper }}_TOKEN|>{{ body }}<|END_OF_TURN_TOKEN|>
{%- endmacro -%}
{%- set ns = namespace(seen=[]) %}
{{ turn('system', 'You are Command.' ~ ('\n' ~ messages[0].content if messages[0].role|lower == 'system' else '')) }}
{%- for message in messages %}
    {%- if message.role|lower == 'system' %}
        {%- continue %}
    {%- elif message.role|lower == 'user' %}
{{ turn('user', message.content) }}
    {%- elif message.role|lower == 'assistant' %}
        {%- if message.tool_calls %}
{{ turn('chatbot', '<|START_ACTION|>' ~ message.tool_calls | map(attribute='function') | map(attribute='name') | join(', ') ~ '<|END_ACTION|>') }}
        {%- else %}
{{ turn('chatbot', '<|START_RESPONSE|>' ~ message.content ~ '<|END_RESPONSE|>') }}
        {%- endif %}
    {%- elif message.role|lower == 'tool' and message.tool_call_id not in ns.seen %}
        {%- set results = [tool_result(message)] %}
        {%- set ns.seen = ns.seen + [message.tool_call_id] %}
        {%- for later in messages[loop.index0 + 1:] %}
            {%- if later.role|lower != 'tool' %}{% break %}{% endif %}
            {%- set results = results + [tool_result(later)] %}
            {%- set ns.seen = ns.seen + [later.tool_call_id] %}
        {%- endfor %}
{{ turn('system', '<|START_TOOL_RESULT|>[\n' ~ results | join(',\n') ~ '\n]<|END_TOOL_RESULT|>') }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}
)J"},
    {"llama3_tools", R"J({{- bos_token }}
{%- set date_string = strftime_now("%d %b %Y") if date_string is not defined else date_string %}
{%- if messages[0].role == 'system' %}
    {%- set system_message = messages[0].content | trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none %}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}
{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' }}
        {%- if message.content is string %}
            {{- message.content | trim }}
        {%- else %}
            {{- message.content | selectattr('type', 'equalto', 'text') | map(attribute='text') | join('\n') }}
        {%- endif %}
        {{- '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if message.tool_calls | length != 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
        {{- '{"name": "' + tool_call.name + '", "parameters": ' + tool_call.arguments | tojson + '}' }}
        {{- "<|eot_id|>" }}
    {%- else %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable and message.content is not string %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)J"},
};

using Case = rf::test::ChatCase;  // template, conversation, add_generation_prompt, rendered, error

const Case kCases[] = {
    {"command_r", "single", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello!<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "single", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hello!<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "system", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
You are terse.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>What is 2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "system", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
You are terse.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>What is 2+2?<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "multi", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
Be brief.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there <|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|> Hello! How can I help?<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Say "quotes" & <tags> — ünïcödé 🦙
	tab<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "multi", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.
Be brief.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Hi there <|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|> Hello! How can I help?<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Say "quotes" & <tags> — ünïcödé 🦙
	tab<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "no_alternation", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>one<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>two<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "no_alternation", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>one<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>two<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "parts", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>[{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}]<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "parts", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>[{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}]<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "tools", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Weather in Paris?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_ACTION|>get_weather<|END_ACTION|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[
{
    "tool_call_id": "call12345",
    "results": "{\"temp\": 21}"
}
]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>It is 21 °C.<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "tools", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>Weather in Paris?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_ACTION|>get_weather<|END_ACTION|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|><|START_TOOL_RESULT|>[
{
    "tool_call_id": "call12345",
    "results": "{\"temp\": 21}"
}
]<|END_TOOL_RESULT|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|>It is 21 °C.<|END_RESPONSE|><|END_OF_TURN_TOKEN|>)J", nullptr},
    {"command_r", "think", true, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|><think>
add them
</think>

4<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>3+3?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>)J", nullptr},
    {"command_r", "think", false, R"J(<s><|START_OF_TURN_TOKEN|><|SYSTEM_TOKEN|>You are Command.<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>2+2?<|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|><|START_RESPONSE|><think>
add them
</think>

4<|END_RESPONSE|><|END_OF_TURN_TOKEN|><|START_OF_TURN_TOKEN|><|USER_TOKEN|>3+3?<|END_OF_TURN_TOKEN|>)J", nullptr},
    {"deepseek", "single", true, R"J(<s><｜User｜>Hello!<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "single", false, R"J(<s><｜User｜>Hello!)J", nullptr},
    {"deepseek", "system", true, R"J(<s>You are terse.<｜User｜>What is 2+2?<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "system", false, R"J(<s>You are terse.<｜User｜>What is 2+2?)J", nullptr},
    {"deepseek", "multi", true, R"J(<s>Be brief.<｜User｜>Hi there <｜Assistant｜> Hello! How can I help?<｜end▁of▁sentence｜><｜User｜>Say "quotes" & <tags> — ünïcödé 🦙
	tab<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "multi", false, R"J(<s>Be brief.<｜User｜>Hi there <｜Assistant｜> Hello! How can I help?<｜end▁of▁sentence｜><｜User｜>Say "quotes" & <tags> — ünïcödé 🦙
	tab)J", nullptr},
    {"deepseek", "no_alternation", true, R"J(<s><｜User｜>one<｜User｜>two<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "no_alternation", false, R"J(<s><｜User｜>one<｜User｜>two)J", nullptr},
    {"deepseek", "parts", true, nullptr, R"J()J"},
    {"deepseek", "parts", false, nullptr, R"J()J"},
    {"deepseek", "tools", true, R"J(<s><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris", "unit": "celsius"}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 21 °C.<｜end▁of▁sentence｜><｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "tools", false, R"J(<s><｜User｜>Weather in Paris?<｜Assistant｜><｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
```json
{"city": "Paris", "unit": "celsius"}
```<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>{"temp": 21}<｜tool▁output▁end｜><｜tool▁outputs▁end｜>It is 21 °C.<｜end▁of▁sentence｜>)J", nullptr},
    {"deepseek", "think", true, R"J(<s><｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>3+3?<｜Assistant｜><think>
)J", nullptr},
    {"deepseek", "think", false, R"J(<s><｜User｜>2+2?<｜Assistant｜>4<｜end▁of▁sentence｜><｜User｜>3+3?)J", nullptr},
    {"llama3_tools", "single", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Hello!<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "single", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Hello!<|eot_id|>)J", nullptr},
    {"llama3_tools", "system", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

What is 2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "system", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

You are terse.<|eot_id|><|start_header_id|>user<|end_header_id|>

What is 2+2?<|eot_id|>)J", nullptr},
    {"llama3_tools", "multi", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>

Say "quotes" & <tags> — ünïcödé 🦙
	tab<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "multi", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

Be brief.<|eot_id|><|start_header_id|>user<|end_header_id|>

Hi there<|eot_id|><|start_header_id|>assistant<|end_header_id|>

Hello! How can I help?<|eot_id|><|start_header_id|>user<|end_header_id|>

Say "quotes" & <tags> — ünïcödé 🦙
	tab<|eot_id|>)J", nullptr},
    {"llama3_tools", "no_alternation", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

one<|eot_id|><|start_header_id|>user<|end_header_id|>

two<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "no_alternation", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

one<|eot_id|><|start_header_id|>user<|end_header_id|>

two<|eot_id|>)J", nullptr},
    {"llama3_tools", "parts", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Describe 
this image.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "parts", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

Describe 
this image.<|eot_id|>)J", nullptr},
    {"llama3_tools", "tools", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Today Date: 15 Jan 2026

{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string",
                    "description": "City name, e.g. \"Paris\""
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
                "city"
            ]
        },
        "return": {
            "type": "string"
        }
    }
}

<|eot_id|><|start_header_id|>user<|end_header_id|>

Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

{"temp": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>

It is 21 °C.<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "tools", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Environment: ipython
Today Date: 15 Jan 2026

{
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string",
                    "description": "City name, e.g. \"Paris\""
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
                "city"
            ]
        },
        "return": {
            "type": "string"
        }
    }
}

<|eot_id|><|start_header_id|>user<|end_header_id|>

Weather in Paris?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

{"name": "get_weather", "parameters": {"city": "Paris", "unit": "celsius"}}<|eot_id|><|start_header_id|>ipython<|end_header_id|>

{"temp": 21}<|eot_id|><|start_header_id|>assistant<|end_header_id|>

It is 21 °C.<|eot_id|>)J", nullptr},
    {"llama3_tools", "think", true, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

<think>
add them
</think>

4<|eot_id|><|start_header_id|>user<|end_header_id|>

3+3?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

)J", nullptr},
    {"llama3_tools", "think", false, R"J(<s><|start_header_id|>system<|end_header_id|>

Today Date: 15 Jan 2026

<|eot_id|><|start_header_id|>user<|end_header_id|>

2+2?<|eot_id|><|start_header_id|>assistant<|end_header_id|>

<think>
add them
</think>

4<|eot_id|><|start_header_id|>user<|end_header_id|>

3+3?<|eot_id|>)J", nullptr},
};

TEST(ChatFamilyB, RendersLikeJinja2) {
  rf::test::expect_chat_cases(kTemplates, kCases);
}

}  // namespace
