package chattemplate

import (
	"slices"
	"strings"
)

// Built-in chat templates for models whose files carry none (a base model's GGUF, an HF
// directory without chat_template), as llama.cpp keeps templates for the families it knows.
// They are written for Hone from each family's published turn format (the markers, roles and
// newlines its instruction-tuned models were trained on), not copied from a model
// repository; each renders system, user, assistant and tool messages, and a generation
// prompt. BuiltinFor picks one from a model's architecture and vocabulary.
const (
	// BuiltinChatML is ChatML, the Qwen2/Qwen2.5 and SmolLM layout: <|im_start|>ROLE\n
	// CONTENT<|im_end|>\n, with Hermes-style tool calls (<tool_call>{...}</tool_call>), the
	// tools listed in the system turn, and tool results as <tool_response> in a user turn.
	BuiltinChatML = "chatml"
	// BuiltinQwen3 is ChatML with Qwen3's thinking: an assistant turn after the last user
	// message writes its reasoning in <think>...</think> (the final one an empty block when
	// it has none, as Qwen3's template does), and enable_thinking=false closes an empty think
	// block in the generation prompt.
	BuiltinQwen3 = "qwen3"
	// BuiltinLlama3 is Llama 3's header layout: <|start_header_id|>ROLE<|end_header_id|>\n\n
	// CONTENT<|eot_id|>, tools listed in the system turn and called as JSON
	// {"name": ..., "parameters": ...}, tool results in the ipython role.
	BuiltinLlama3 = "llama3"
	// BuiltinGemma is Gemma's (2 and 3): <start_of_turn>user|model\nCONTENT<end_of_turn>\n,
	// a system message put before the first user message's content, tool results as user
	// turns.
	BuiltinGemma = "gemma"
	// BuiltinPhi3 is Phi-3's: <|system|>, <|user|> and <|assistant|> turns each closed with
	// <|end|>\n.
	BuiltinPhi3 = "phi3"
	// BuiltinMistral is the [INST] layout of Mistral and Llama 2 SentencePiece models:
	// <s>[INST] USER [/INST]ANSWER</s>, a system message put before the first user message.
	BuiltinMistral = "mistral"
)

// Builtins names the built-in templates.
var Builtins = []string{BuiltinChatML, BuiltinQwen3, BuiltinLlama3, BuiltinGemma, BuiltinPhi3, BuiltinMistral}

// Builtin returns a built-in template's source by name.
func Builtin(name string) (string, bool) {
	src, ok := builtinSrc[name]
	return src, ok
}

// BuiltinFor picks the built-in template of a model from its family's template (pref, a
// built-in's name or "": package model's Family.ChatTemplate, gemma for Gemma 2 and 3, phi3,
// chatml for Qwen2, qwen3 for Qwen3 and Qwen3-MoE) and its vocabulary (special reports
// whether a text is one of its special tokens): pref when the vocabulary has its turn
// markers; otherwise (and for llama and mistral, which name none) by the markers the
// vocabulary has, as llama.cpp tells them apart: Llama 3's headers, ChatML's
// <|im_start|>/<|im_end|> (SmolLM), Gemma's, Phi-3's, and [INST] for a SentencePiece
// vocabulary with <s> and </s> (Mistral, Llama 2). "" when none fits.
func BuiltinFor(pref string, special func(string) bool) string {
	has := func(name string) bool {
		return !slices.ContainsFunc(builtinMarkers[name], func(t string) bool { return !special(t) })
	}
	if pref != "" && has(pref) {
		return pref
	}
	for _, name := range []string{BuiltinLlama3, BuiltinChatML, BuiltinGemma, BuiltinPhi3, BuiltinMistral} {
		if has(name) {
			return name
		}
	}
	return ""
}

// builtinMarkers are the special tokens each built-in template writes.
var builtinMarkers = map[string][]string{
	BuiltinChatML:  {"<|im_start|>", "<|im_end|>"},
	BuiltinQwen3:   {"<|im_start|>", "<|im_end|>"},
	BuiltinLlama3:  {"<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"},
	BuiltinGemma:   {"<start_of_turn>", "<end_of_turn>"},
	BuiltinPhi3:    {"<|user|>", "<|assistant|>", "<|end|>"},
	BuiltinMistral: {"<s>", "</s>"},
}

var builtinSrc = map[string]string{
	BuiltinChatML:  chatMLTemplate(false),
	BuiltinQwen3:   chatMLTemplate(true),
	BuiltinLlama3:  llama3Template,
	BuiltinGemma:   gemmaTemplate,
	BuiltinPhi3:    phi3Template,
	BuiltinMistral: mistralTemplate,
}

// chatMLTemplate is ChatML with Hermes tool calls; thinking adds Qwen3's reasoning blocks.
func chatMLTemplate(thinking bool) string {
	var b strings.Builder
	b.WriteString(`{%- set ns = namespace(last_user=-1) -%}
{%- for message in messages -%}
{%- if message.role == 'user' -%}{%- set ns.last_user = loop.index0 -%}{%- endif -%}
{%- endfor -%}
{%- if tools -%}
{{- '<|im_start|>system\n' -}}
{%- if messages and messages[0].role == 'system' and messages[0].content -%}{{- messages[0].content + '\n\n' -}}{%- endif -%}
{{- '# Tools\n\nYou may call one or more functions to assist with the user query.\n\nYou are provided with function signatures within <tools></tools> XML tags:\n<tools>' -}}
{%- for tool in tools -%}{{- '\n' + (tool | tojson) -}}{%- endfor -%}
{{- '\n</tools>\n\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call><|im_end|>\n' -}}
{%- elif messages and messages[0].role == 'system' -%}
{{- '<|im_start|>system\n' -}}{%- if messages[0].content -%}{{- messages[0].content -}}{%- endif -%}{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'assistant' -%}
{{- '<|im_start|>assistant\n' -}}
`)
	if thinking {
		b.WriteString(`{%- if loop.index0 > ns.last_user and (loop.last or message.reasoning) -%}{{- '<think>\n' -}}{%- if message.reasoning -%}{{- message.reasoning | trim -}}{%- endif -%}{{- '\n</think>\n\n' -}}{%- endif -%}
`)
	}
	b.WriteString(`{%- if message.content -%}{{- message.content -}}{%- endif -%}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- if message.content or not loop.first -%}{{- '\n' -}}{%- endif -%}
{%- if call.function -%}{%- set fn = call.function -%}{%- else -%}{%- set fn = call -%}{%- endif -%}
{{- '<tool_call>\n{"name": ' + (fn.name | tojson) + ', "arguments": ' + (fn.arguments | tojson) + '}\n</tool_call>' -}}
{%- endfor -%}
{%- endif -%}
{{- '<|im_end|>\n' -}}
{%- elif message.role == 'tool' -%}
{%- if loop.first -%}{{- '<|im_start|>user' -}}{%- elif messages[loop.index0 - 1].role != 'tool' -%}{{- '<|im_start|>user' -}}{%- endif -%}
{{- '\n<tool_response>\n' -}}{%- if message.content -%}{{- message.content -}}{%- endif -%}{{- '\n</tool_response>' -}}
{%- if loop.last -%}{{- '<|im_end|>\n' -}}{%- elif messages[loop.index0 + 1].role != 'tool' -%}{{- '<|im_end|>\n' -}}{%- endif -%}
{%- else -%}
{{- '<|im_start|>' + message.role + '\n' -}}{%- if message.content -%}{{- message.content -}}{%- endif -%}{{- '<|im_end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
`)
	if thinking {
		b.WriteString(`{%- if enable_thinking is defined and not enable_thinking -%}{{- '<think>\n\n</think>\n\n' -}}{%- endif -%}
`)
	}
	b.WriteString(`{%- endif -%}`)
	return b.String()
}

const llama3Template = `{{- bos_token -}}
{%- set ns = namespace(system='') -%}
{%- if messages and messages[0].role == 'system' and messages[0].content -%}{%- set ns.system = messages[0].content | trim -%}{%- endif -%}
{%- if tools -%}
{%- set ns.system = ns.system + ('\n\n' if ns.system else '') + 'You have access to the following functions. To call a function, respond with JSON in the format {"name": function name, "parameters": dictionary of argument name and its value}. Do not use variables.\n\n' -%}
{%- for tool in tools -%}{%- set ns.system = ns.system + (tool | tojson) + '\n\n' -%}{%- endfor -%}
{%- set ns.system = ns.system | trim -%}
{%- endif -%}
{%- if ns.system -%}{{- '<|start_header_id|>system<|end_header_id|>\n\n' + ns.system + '<|eot_id|>' -}}{%- endif -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- elif message.role == 'assistant' -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- if message.tool_calls -%}
{%- for call in message.tool_calls -%}
{%- if call.function -%}{%- set fn = call.function -%}{%- else -%}{%- set fn = call -%}{%- endif -%}
{%- if not loop.first -%}{{- '; ' -}}{%- endif -%}
{{- '{"name": ' + (fn.name | tojson) + ', "parameters": ' + (fn.arguments | tojson) + '}' -}}
{%- endfor -%}
{%- elif message.content -%}{{- message.content | trim -}}
{%- endif -%}
{{- '<|eot_id|>' -}}
{%- elif message.role == 'tool' -%}
{{- '<|start_header_id|>ipython<|end_header_id|>\n\n' -}}{%- if message.content -%}{{- message.content | trim -}}{%- endif -%}{{- '<|eot_id|>' -}}
{%- else -%}
{{- '<|start_header_id|>' + message.role + '<|end_header_id|>\n\n' -}}{%- if message.content -%}{{- message.content | trim -}}{%- endif -%}{{- '<|eot_id|>' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}{%- endif -%}`

const gemmaTemplate = `{{- bos_token -}}
{%- set ns = namespace(system='', first=true) -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- if message.content -%}{%- set ns.system = (message.content | trim) + '\n\n' -%}{%- endif -%}
{%- else -%}
{%- if message.role == 'assistant' -%}{{- '<start_of_turn>model\n' -}}{%- else -%}{{- '<start_of_turn>user\n' -}}{%- endif -%}
{%- if ns.first and message.role != 'assistant' -%}{{- ns.system -}}{%- set ns.first = false -%}{%- endif -%}
{%- if message.content -%}{{- message.content | trim -}}{%- endif -%}
{{- '<end_of_turn>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<start_of_turn>model\n' -}}{%- endif -%}`

const phi3Template = `{%- for message in messages -%}
{%- if message.role == 'system' -%}
{%- if message.content -%}{{- '<|system|>\n' + message.content + '<|end|>\n' -}}{%- endif -%}
{%- elif message.role == 'assistant' -%}
{{- '<|assistant|>\n' -}}{%- if message.content -%}{{- message.content -}}{%- endif -%}{{- '<|end|>\n' -}}
{%- else -%}
{{- '<|user|>\n' -}}{%- if message.content -%}{{- message.content -}}{%- endif -%}{{- '<|end|>\n' -}}
{%- endif -%}
{%- endfor -%}
{%- if add_generation_prompt -%}{{- '<|assistant|>\n' -}}{%- endif -%}`

const mistralTemplate = `{{- bos_token -}}
{%- set ns = namespace(system='', first=true) -%}
{%- for message in messages -%}
{%- if message.role == 'system' and loop.first -%}
{%- if message.content -%}{%- set ns.system = (message.content | trim) + '\n\n' -%}{%- endif -%}
{%- elif message.role == 'assistant' -%}
{%- if message.content -%}{{- message.content | trim -}}{%- endif -%}{{- eos_token -}}
{%- else -%}
{{- '[INST] ' -}}
{%- if ns.first -%}{{- ns.system -}}{%- set ns.first = false -%}{%- endif -%}
{%- if message.content -%}{{- message.content | trim -}}{%- endif -%}
{{- ' [/INST]' -}}
{%- endif -%}
{%- endfor -%}`
