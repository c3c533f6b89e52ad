// Chat templates in the style of Llama 2, ChatML/Qwen (with tools) and Phi-3, written for these tests (tests/templates/<name>.jinja),
// rendered for a set of conversations with and without the generation prompt.
// The expected strings are what Python Jinja2 3.1.6 renders when configured
// as Hugging Face transformers configures it (trim_blocks, lstrip_blocks,
// loop controls, tojson without ASCII escaping, raise_exception,
// strftime_now fixed at 2026-01-15), bos "<s>", eos "</s>".
#include <string>

#include "unit/template_cases.h"

namespace {

const char* const kTemplates[] = {"llama2", "chatml_tools", "phi3"};  // tests/templates/<name>.jinja

using Case = rf::test::ChatCase;  // template, conversation, add_generation_prompt, rendered, error

const Case kCases[] = {
    {"chatml_tools", "single", true, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "single", false, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Hello!<|im_end|>
)J", nullptr},
    {"chatml_tools", "system", true, R"J(<|im_start|>system
You are terse.<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "system", false, R"J(<|im_start|>system
You are terse.<|im_end|>
<|im_start|>user
What is 2+2?<|im_end|>
)J", nullptr},
    {"chatml_tools", "multi", true, R"J(<|im_start|>system
Be brief.<|im_end|>
<|im_start|>user
Hi there <|im_end|>
<|im_start|>assistant
 Hello! How can I help?<|im_end|>
<|im_start|>user
Say "quotes" & <tags> — ünïcödé 🦙
	tab<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "multi", false, R"J(<|im_start|>system
Be brief.<|im_end|>
<|im_start|>user
Hi there <|im_end|>
<|im_start|>assistant
 Hello! How can I help?<|im_end|>
<|im_start|>user
Say "quotes" & <tags> — ünïcödé 🦙
	tab<|im_end|>
)J", nullptr},
    {"chatml_tools", "no_alternation", true, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
one<|im_end|>
<|im_start|>user
two<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "no_alternation", false, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
one<|im_end|>
<|im_start|>user
two<|im_end|>
)J", nullptr},
    {"chatml_tools", "parts", true, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Describe this image.<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "parts", false, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
Describe this image.<|im_end|>
)J", nullptr},
    {"chatml_tools", "tools", true, R"J(<|im_start|>system
# Tools

<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}, "return": {"type": "string"}}}
</tools><|im_end|>
<|im_start|>user
Weather in Paris?<|im_end|>
<|im_start|>assistant

<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temp": 21}
</tool_response><|im_end|>
<|im_start|>assistant
It is 21 °C.<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "tools", false, R"J(<|im_start|>system
# Tools

<tools>
{"type": "function", "function": {"name": "get_weather", "description": "Get the weather in a city.", "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City name, e.g. \"Paris\""}, "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}}, "required": ["city"]}, "return": {"type": "string"}}}
</tools><|im_end|>
<|im_start|>user
Weather in Paris?<|im_end|>
<|im_start|>assistant

<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius"}}
</tool_call><|im_end|>
<|im_start|>user
<tool_response>
{"temp": 21}
</tool_response><|im_end|>
<|im_start|>assistant
It is 21 °C.<|im_end|>
)J", nullptr},
    {"chatml_tools", "think", true, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
2+2?<|im_end|>
<|im_start|>assistant
<think>
add them
</think>

4<|im_end|>
<|im_start|>user
3+3?<|im_end|>
<|im_start|>assistant
)J", nullptr},
    {"chatml_tools", "think", false, R"J(<|im_start|>system
You are a helpful assistant.<|im_end|>
<|im_start|>user
2+2?<|im_end|>
<|im_start|>assistant
<think>
add them
</think>

4<|im_end|>
<|im_start|>user
3+3?<|im_end|>
)J", nullptr},
    {"llama2", "single", true, R"J(<s>[INST] Hello! [/INST])J", nullptr},
    {"llama2", "single", false, R"J(<s>[INST] Hello! [/INST])J", nullptr},
    {"llama2", "system", true, R"J(<s>[INST] <<SYS>>
You are terse.
<</SYS>>

What is 2+2? [/INST])J", nullptr},
    {"llama2", "system", false, R"J(<s>[INST] <<SYS>>
You are terse.
<</SYS>>

What is 2+2? [/INST])J", nullptr},
    {"llama2", "multi", true, R"J(<s>[INST] <<SYS>>
Be brief.
<</SYS>>

Hi there [/INST] Hello! How can I help? </s><s>[INST] Say "quotes" & <tags> — ünïcödé 🦙
	tab [/INST])J", nullptr},
    {"llama2", "multi", false, R"J(<s>[INST] <<SYS>>
Be brief.
<</SYS>>

Hi there [/INST] Hello! How can I help? </s><s>[INST] Say "quotes" & <tags> — ünïcödé 🦙
	tab [/INST])J", nullptr},
    {"llama2", "no_alternation", true, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"llama2", "no_alternation", false, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"llama2", "parts", true, R"J(<s>[INST] [{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}] [/INST])J", nullptr},
    {"llama2", "parts", false, R"J(<s>[INST] [{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}] [/INST])J", nullptr},
    {"llama2", "tools", true, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"llama2", "tools", false, nullptr, R"J(Conversation roles must alternate user/assistant/user/assistant/...)J"},
    {"llama2", "think", true, R"J(<s>[INST] 2+2? [/INST] <think>
add them
</think>

4 </s><s>[INST] 3+3? [/INST])J", nullptr},
    {"llama2", "think", false, R"J(<s>[INST] 2+2? [/INST] <think>
add them
</think>

4 </s><s>[INST] 3+3? [/INST])J", nullptr},
    {"phi3", "single", true, R"J(<|user|>
Hello!<|end|>
<|assistant|>
)J", nullptr},
    {"phi3", "single", false, R"J(<|user|>
Hello!<|end|>
</s>
)J", nullptr},
    {"phi3", "system", true, R"J(<|system|>
You are terse.<|end|>
<|user|>
What is 2+2?<|end|>
<|assistant|>
)J", nullptr},
    {"phi3", "system", false, R"J(<|system|>
You are terse.<|end|>
<|user|>
What is 2+2?<|end|>
</s>
)J", nullptr},
    {"phi3", "multi", true, R"J(<|system|>
Be brief.<|end|>
<|user|>
Hi there <|end|>
<|assistant|>
 Hello! How can I help?<|end|>
<|user|>
Say "quotes" & <tags> — ünïcödé 🦙
	tab<|end|>
<|assistant|>
)J", nullptr},
    {"phi3", "multi", false, R"J(<|system|>
Be brief.<|end|>
<|user|>
Hi there <|end|>
<|assistant|>
 Hello! How can I help?<|end|>
<|user|>
Say "quotes" & <tags> — ünïcödé 🦙
	tab<|end|>
</s>
)J", nullptr},
    {"phi3", "no_alternation", true, R"J(<|user|>
one<|end|>
<|user|>
two<|end|>
<|assistant|>
)J", nullptr},
    {"phi3", "no_alternation", false, R"J(<|user|>
one<|end|>
<|user|>
two<|end|>
</s>
)J", nullptr},
    {"phi3", "parts", true, R"J(<|user|>
[{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}]<|end|>
<|assistant|>
)J", nullptr},
    {"phi3", "parts", false, R"J(<|user|>
[{'type': 'text', 'text': 'Describe '}, {'type': 'image'}, {'type': 'text', 'text': 'this image.'}]<|end|>
</s>
)J", nullptr},
    {"phi3", "tools", true, nullptr, R"J(Unknown role: tool)J"},
    {"phi3", "tools", false, nullptr, R"J(Unknown role: tool)J"},
    {"phi3", "think", true, R"J(<|user|>
2+2?<|end|>
<|assistant|>
<think>
add them
</think>

4<|end|>
<|user|>
3+3?<|end|>
<|assistant|>
)J", nullptr},
    {"phi3", "think", false, R"J(<|user|>
2+2?<|end|>
<|assistant|>
<think>
add them
</think>

4<|end|>
<|user|>
3+3?<|end|>
</s>
)J", nullptr},
};

TEST(ChatFamilyA, RendersLikeJinja2) {
  rf::test::expect_chat_cases(kTemplates, kCases);
}

}  // namespace
